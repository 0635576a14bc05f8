"""``GET /api/events/stream``: Server-Sent Events, resumable.

Each event is sent as ``id: SEQ`` + ``data: <the events.jsonl line>``. A client that reconnects with
``Last-Event-ID`` (browsers do it by themselves) or ``?after=SEQ`` first gets every stored event after that
number, then the live ones, with none lost or repeated in between: the listener is registered before the
stored events are read, and anything at or below the last number sent is skipped. Without either, the stream
starts with the next event. ``?mission=ID`` keeps one mission's events.

At most ``[http] max_stream_clients`` streams are open at once; one more is answered 503 with ``Retry-After``
(a browser's EventSource gives up on it; the web view tries again after that long). A stream holds no store
connection while it waits: it borrows one from the reader pool for each catch-up page only.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable

import anyio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from polpo.events.catalog import Event
from polpo.http.context import ApiContext
from polpo.http.hub import event_line
from polpo.http.problem import problem_response
from polpo.store import read

__all__ = ["StreamSlots", "event_stream"]

KEEPALIVE = 15.0  # seconds: a comment line, so proxies keep the connection and a dead client is noticed
COALESCE = 0.05  # seconds: events arriving together go out in one write (a busy daemon commits many small batches)
PAGE = 1000
RETRY_AFTER = 5  # seconds, when every stream slot is taken


class StreamSlots:
    """How many streams are open, against the cap (a plain count: the event loop is the only writer)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.taken = 0

    def take(self) -> bool:
        if self.taken >= self.limit:
            return False
        self.taken += 1
        return True

    def release(self) -> None:
        self.taken -= 1


async def event_stream(ctx: ApiContext, request: Request, slots: StreamSlots) -> Response:
    if not slots.take():
        return problem_response(503, "too many streams", f"{slots.limit} event streams are open "
                                f"([http] max_stream_clients); try again in {RETRY_AFTER} s",
                                headers={"retry-after": str(RETRY_AFTER)})
    try:
        raw = request.headers.get("last-event-id") or request.query_params.get("after")
        after = int(raw) if raw is not None and raw.strip().isdigit() else None
        mission = request.query_params.get("mission") or None
        if after is None:
            after = await ctx.readers.run(read.last_event_seq)
    except BaseException:
        slots.release()
        raise
    return _Stream(_frames(ctx, after, mission), slots.release)


class _Stream(StreamingResponse):
    """An event stream that gives its slot back and closes its generator however the response ends."""

    def __init__(self, frames: AsyncGenerator[bytes, None], release: Callable[[], None]) -> None:
        super().__init__(frames, media_type="text/event-stream",
                         headers={"cache-control": "no-cache", "x-accel-buffering": "no"})
        self.frames = frames
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()
            with anyio.CancelScope(shield=True):
                await self.frames.aclose()  # its listener leaves the hub now, not when the generator is collected


async def _frames(ctx: ApiContext, after: int, mission: str | None) -> AsyncGenerator[bytes, None]:
    match = (lambda ev: ev.mission_id == mission) if mission is not None else None
    listener = ctx.hub.listen(match)
    last = after
    try:
        yield b"retry: 2000\n\n"
        while True:
            listener.overflowed = False
            while True:  # catch up from the store (at the start, and after falling behind)
                rows = await ctx.readers.run(_page(last, mission))
                if rows:
                    yield b"".join(_frame(r[0], event_line(*r)) for r in rows)
                    last = rows[-1][0]
                if len(rows) < PAGE:
                    break
            while not listener.overflowed and not ctx.hub.closed:
                await listener.wait(KEEPALIVE)
                if listener.buffer and not ctx.hub.closed:
                    await anyio.sleep(COALESCE)
                batch = [ev for ev in listener.take() if ev.seq > last]
                if batch:
                    yield b"".join(_frame(ev.seq, _line(ev)) for ev in batch)
                    last = batch[-1].seq
                elif not listener.overflowed and not ctx.hub.closed:
                    yield b": keep-alive\n\n"
            if ctx.hub.closed:
                return
    finally:
        listener.close()


def _page(after: int, mission: str | None) -> Callable[[read.Conn], list[tuple[int, str, str, str | None, str | None, str, str | None]]]:
    return lambda con: read.events(con, after, mission=mission, limit=PAGE)


def _line(ev: Event) -> bytes:
    return event_line(ev.seq, ev.ts, ev.event, ev.mission_id, ev.task_id, ev.data_bytes(), ev.node)


def _frame(seq: int, line: bytes) -> bytes:
    return b"id: " + str(seq).encode() + b"\ndata: " + line + b"\n\n"
