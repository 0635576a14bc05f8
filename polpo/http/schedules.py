"""``GET /api/schedules`` and ``POST /api/schedules/{id}/pause|resume|remove``: the schedules and their commands.

Reads go through the reader pool (:mod:`polpo.store.schedule_view`); a command goes to the engine as the
command inbox's do, and the answer is the daemon's (``done``, or ``refused`` with the reason: 409).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from polpo.command_args import encode
from polpo.http.body import json_object, person
from polpo.http.context import ApiContext, json_response
from polpo.http.problem import problem_response
from polpo.store.schedule_view import schedules_view

__all__ = ["ScheduleRoutes"]

ACTIONS = ("pause", "resume", "remove")


class ScheduleRoutes:
    def __init__(self, ctx: ApiContext) -> None:
        self.ctx = ctx

    async def list(self, request: Request) -> Response:
        now = self.ctx.clock.now()  # next fire times as the daemon's scheduler sees them (its injected clock)
        rows = await self.ctx.readers.run(lambda con: schedules_view(con, now))
        return json_response({"schedules": rows})

    async def act(self, request: Request) -> Response:
        action, ident = request.path_params["action"], request.path_params["schedule_id"]
        if action not in ACTIONS:
            return problem_response(404, "not found", f"no schedule action {action!r} (one of {', '.join(ACTIONS)})")
        body = await json_object(request, self.ctx.cfg.http.max_body)
        if isinstance(body, Response):
            return body
        status, answer = await self.ctx.apply_command(f"schedule-{action}", encode(ident, by=person(request, body)))
        if status != "done":
            return problem_response(409, "refused", answer, message=answer, target=ident)
        return json_response({"status": status, "message": answer, "target": ident})
