"""The JSON endpoints: health, missions, tasks, commands and the stored events.

Reads go through the reader pool (worker threads, committed state); commands go straight to the engine's
command handler, so the answer is the daemon's own (``done`` or ``refused`` with the reason). A finished
mission's answer is kept (a few of them) until an event of that mission arrives: every change to what it shows
comes with one (a retry, say), and a 10 000-task mission is then served without being assembled again.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import replace
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from polpo.attention.items import mission_state, task_state
from polpo.attention.read import waiting
from polpo.command_args import encode
from polpo.http.body import json_object, person
from polpo.http.context import ApiContext, json_response
from polpo.http.hub import event_line
from polpo.http.problem import problem_response
from polpo.store import mission_list, read, views
from polpo.store.read import Conn

__all__ = ["Api"]

MAX_EVENTS_PAGE = 5000
CACHED_MISSIONS = 8
FINISHED = frozenset({"completed", "failed", "cancelled"})


class Api:
    def __init__(self, ctx: ApiContext) -> None:
        self.ctx = ctx
        self._cache: OrderedDict[str, tuple[int, bytes]] = OrderedDict()  # id -> (its last event, body)

    async def healthz(self, request: Request) -> Response:
        try:
            await self.ctx.readers.run(read.ping)
            store_ok, error = True, None
        except Exception as e:  # the answer says what is wrong instead of failing
            store_ok, error = False, f"{type(e).__name__}: {e}"
        body: dict[str, Any] = {"status": "ok" if store_ok else "degraded", "version": self.ctx.version,
                                "uptimeSeconds": round(time.monotonic() - self.ctx.started, 3),
                                "store": {"ok": store_ok}}
        if error:
            body["store"]["error"] = error
        return json_response(body, 200 if store_ok else 503)

    async def missions(self, request: Request) -> Response:
        """The newest missions, a page at a time (``before=SEQ``: those accepted before that one, ``next`` in the
        reply, an index walk whatever the history; or ``offset``), of a ``status`` (``a,b``: either; ``waiting``:
        those with something that waits for a person; ``open``: running or cancelling), searched by ``q`` (a part of
        the name or id); each with its ``state`` as people read it ("waiting for approval")."""
        q = request.query_params
        limit = _int(q.get("limit"), 200, 1, 10_000)
        offset = _int(q.get("offset"), 0, 0, None)
        before = _int(q.get("before"), 0, 0, None) if q.get("before") is not None else None
        status = q.get("status") or ("open" if q.get("finished") == "false" else None)

        def page(con: Conn) -> dict[str, Any]:
            items = waiting(con)
            ids = {i.mission_id for i in items if i.mission_id}
            f = mission_list.Filter(status=None if status == "waiting" else status,
                                    ids=ids if status == "waiting" else None, name=q.get("q") or None, before=before)
            ms = views.missions_view(con, f, limit=limit, offset=offset)
            for m in ms:
                m["state"] = mission_state(m["status"], (i for i in items if i.mission_id == m["id"]))
            more = len(ms) == limit and ms[0]["seq"] > 1
            return {"missions": [views.camel(m) for m in ms], "total": mission_list.count(con, replace(f, before=None)),
                    "offset": offset, "limit": limit, "next": ms[0]["seq"] if more else None}

        return json_response(await self.ctx.readers.run(page))

    async def attention(self, request: Request) -> Response:
        """What waits for a person: each item with what to do, the commands and the web view's buttons."""
        items = await self.ctx.readers.run(waiting)
        return json_response({"count": len(items), "items": [i.to_json() for i in items]})

    async def mission(self, request: Request) -> Response:
        ident = request.path_params["mission_id"]
        version = self.ctx.hub.version(ident)
        hit = self._cache.get(ident)
        if hit is not None and hit[0] == version:
            self._cache.move_to_end(ident)
            return Response(hit[1], media_type="application/json")
        m = await self.ctx.readers.run(lambda con: views.mission_view(con, ident, raw_spec=True, camel_case=True))
        if m is None:
            return _not_found("mission", ident)
        body = orjson.dumps(m, option=orjson.OPT_NON_STR_KEYS)
        if m["id"] == ident and m["status"] in FINISHED and self.ctx.hub.version(ident) == version:
            self._cache[ident] = (version, body)  # no event of it arrived while it was read
            while len(self._cache) > CACHED_MISSIONS:
                self._cache.popitem(last=False)
        return Response(body, media_type="application/json")

    async def task(self, request: Request) -> Response:
        ident = request.path_params["task_id"]
        t = await self.ctx.readers.run(lambda con: views.task_view(con, ident, full=True))
        if t is None:
            return _not_found("task", ident)
        t["state"] = task_state(t["status"], t.get("waiting_for"))
        t["agentConfig"] = self._agent(t["agent"])
        return json_response(views.camel(t))

    def _agent(self, name: str) -> dict[str, Any] | None:
        """What a task's agent is (what a person approves): its type and its command or model."""
        a = self.ctx.cfg.agents.get(name)
        if a is None:
            return None
        return {"type": a.type, "command": a.command, "model": a.model, "apiBase": a.api_base}

    async def events(self, request: Request) -> Response:
        after = _int(request.query_params.get("after"), 0, 0, None)
        limit = _int(request.query_params.get("limit"), 1000, 1, MAX_EVENTS_PAGE)
        mission = request.query_params.get("mission") or None
        rows = await self.ctx.readers.run(lambda con: read.events(con, after, mission=mission, limit=limit))
        last = rows[-1][0] if rows else after
        body = b'{"events":[' + b",".join(event_line(*r) for r in rows) + b'],"last":' + str(last).encode()
        body += b',"more":' + (b"true" if len(rows) == limit else b"false") + b"}"
        return Response(body, media_type="application/json")

    # -- commands -------------------------------------------------------------------------------------------
    async def cancel(self, request: Request) -> Response:
        return await self._command("cancel", request.path_params["mission_id"], read.mission, "mission")

    async def retry(self, request: Request) -> Response:
        """An optional body raises the task's LLM budget from now on: ``{"usd": 0.5, "tokens": 200000}`` (either
        key), as ``polpo retry TASK --budget USD --tokens N`` does."""
        body = await json_object(request, self.ctx.cfg.http.max_body)
        if isinstance(body, Response):
            return body
        args = {k: body[k] for k in ("usd", "tokens") if body.get(k) is not None}
        for key, value in args.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e12 or (
                    key == "tokens" and not isinstance(value, int)):
                return problem_response(400, "bad request", f"{key} must be a positive "
                                        + ("whole number of tokens" if key == "tokens" else "amount in USD"))
        return await self._command("retry", request.path_params["task_id"], read.task, "task", args)

    async def approve(self, request: Request) -> Response:
        return await self._said("approve", request, request.path_params["task_id"], read.task, "task",
                                ("note", "score"))

    async def resume(self, request: Request) -> Response:
        return await self._said("resume", request, request.path_params["mission_id"], read.mission, "mission",
                                ("checkpoint", "note"))

    async def reject(self, request: Request) -> Response:
        return await self._said("reject", request, request.path_params["task_id"], read.task, "task",
                                ("reason", "score"))

    async def answer(self, request: Request) -> Response:
        """An agent's question answered: ``{"answer": "…"}`` (and ``by``)."""
        return await self._said("answer", request, request.path_params["task_id"], read.task, "task", ("answer",))

    async def override(self, request: Request) -> Response:
        return await self._said("override", request, request.path_params["task_id"], read.task, "task",
                                ("passed", "reason", "score"))

    async def _said(self, kind: str, request: Request, ident: str, lookup: Any, what: str,
                    fields: tuple[str, ...]) -> Response:
        """A person's command: what they said from the JSON body, who they are from the body's ``by``, else the
        user name of HTTP Basic auth (the web view's), else ``api``."""
        body = await json_object(request, self.ctx.cfg.http.max_body)
        if isinstance(body, Response):
            return body
        args = {k: body[k] for k in fields if body.get(k) is not None}
        args["by"] = person(request, body)
        return await self._command(kind, ident, lookup, what, args)

    async def _command(self, kind: str, ident: str, lookup: Any, what: str,
                       args: dict[str, Any] | None = None) -> Response:
        def find(con: Conn) -> dict[str, Any] | None:
            row: dict[str, Any] | None = lookup(con, ident)
            return row

        row = await self.ctx.readers.run(find)
        if row is None:
            return _not_found(what, ident)
        status, answer = await self.ctx.apply_command(kind, encode(row["id"], **(args or {})))
        if status != "done":  # refused: a problem answer that keeps the command's own fields
            return problem_response(409, "refused", answer, message=answer, target=row["id"])
        return json_response({"status": status, "message": answer, "target": row["id"]})


def _not_found(what: str, ident: str) -> Response:
    return problem_response(404, "not found", f"no {what} {ident!r}; `polpo status --all` lists them")


def _int(raw: str | None, default: int, lo: int, hi: int | None) -> int:
    try:
        v = int(raw) if raw is not None else default
    except ValueError:
        v = default
    return max(lo, v if hi is None else min(hi, v))
