"""The ASGI application: routes, the browser guard and the token check, the web view's files."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from polpo.http.api import Api
from polpo.http.auth import TokenAuth
from polpo.http.context import ApiContext
from polpo.http.guard import BrowserGuard, GuardPolicy
from polpo.http.openapi import openapi_document
from polpo.http.problem import problem_response
from polpo.http.schedules import ScheduleRoutes
from polpo.http.sse import StreamSlots, event_stream
from polpo.http.submit import submit_mission
from polpo.store.errors import StoreUnavailable
from polpo.store.read import Unavailable
from polpo.web import STATIC

__all__ = ["build_app"]

UNAVAILABLE_RETRY_AFTER = 5  # seconds: a client asks again after the database's restart
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
# the web view has buttons that act: no other site may show it in a frame and trick a click
INDEX_HEADERS = {"cache-control": "no-cache", "x-frame-options": "DENY",
                 "content-security-policy": "frame-ancestors 'none'"}


def build_app(ctx: ApiContext, token: str | None) -> Starlette:
    api = Api(ctx)
    schedules = ScheduleRoutes(ctx)
    spec = openapi_document(ctx.version)
    streams = StreamSlots(ctx.cfg.http.max_stream_clients)

    async def openapi(request: Request) -> Response:
        return Response(spec, media_type="application/json")

    async def metrics(request: Request) -> Response:
        if ctx.metrics is None:
            return Response("metrics are off\n", status_code=404, media_type="text/plain")
        return Response(ctx.metrics(), media_type=PROMETHEUS_TEXT)

    async def stream(request: Request) -> Response:
        return await event_stream(ctx, request, streams)

    async def submit(request: Request) -> Response:
        return await submit_mission(ctx, request)

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers=INDEX_HEADERS)

    async def favicon(request: Request) -> Response:  # what a browser asks for a page without its own icon link
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")

    routes = [
        Route("/healthz", api.healthz, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/api/missions", api.missions, methods=["GET"]),
        Route("/api/attention", api.attention, methods=["GET"]),
        Route("/api/missions", submit, methods=["POST"]),
        Route("/api/missions/{mission_id}", api.mission, methods=["GET"]),
        Route("/api/missions/{mission_id}/cancel", api.cancel, methods=["POST"]),
        Route("/api/tasks/{task_id}", api.task, methods=["GET"]),
        Route("/api/tasks/{task_id}/retry", api.retry, methods=["POST"]),
        Route("/api/tasks/{task_id}/approve", api.approve, methods=["POST"]),
        Route("/api/schedules", schedules.list, methods=["GET"]),
        Route("/api/schedules/{schedule_id}/{action}", schedules.act, methods=["POST"]),
        Route("/api/missions/{mission_id}/resume", api.resume, methods=["POST"]),
        Route("/api/tasks/{task_id}/reject", api.reject, methods=["POST"]),
        Route("/api/tasks/{task_id}/answer", api.answer, methods=["POST"]),
        Route("/api/tasks/{task_id}/override", api.override, methods=["POST"]),
        Route("/api/events", api.events, methods=["GET"]),
        Route("/api/events/stream", stream, methods=["GET"]),
        Route("/", index, methods=["GET"]),
        Route("/favicon.ico", favicon, methods=["GET"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(routes=routes, middleware=[Middleware(BrowserGuard, policy=GuardPolicy.of(ctx.cfg.http)),
                                                Middleware(TokenAuth, token=token)],
                     exception_handlers={StoreUnavailable: _unavailable, Unavailable: _unavailable})


async def _unavailable(_request: Request, exc: Exception) -> Response:
    """The database is restarting or unreachable: 503 with the reason and when to ask again, not a 500."""
    return problem_response(503, "unavailable", f"{exc}; try again in {UNAVAILABLE_RETRY_AFTER} s",
                            headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER)})
