"""Read-only queries from async code (the HTTP API, metrics, traces) without blocking the event loop.

The queries in :mod:`polpo.store.read` are synchronous; each call here runs one of them in a worker thread, on a
connection of a small pool, so a slow read never stalls the daemon's writer or its tasks, and a 10 000-row
answer is assembled off the loop.

The pool is bounded and shrinks: a call takes a connection only once it holds one of the ``size`` slots, so
300 callers at once (300 event streams starting) share ``size`` connections instead of opening 300; a
connection left unused for ``idle`` seconds is closed, down to ``floor`` kept warm (:meth:`ReaderPool.maintain`
does it between calls).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import TypeVar

import anyio

from polpo.fsfaults import Pause
from polpo.store.errors import StoreError, StoreUnavailable
from polpo.store.read import Conn, Unavailable

log = logging.getLogger("polpo.store")

__all__ = ["OUTAGE_WAIT", "ReaderPool"]

T = TypeVar("T")

SIZE = 4  # connections at most, in use or idle
FLOOR = 1  # idle connections kept however long they wait
IDLE = 5.0  # seconds: an idle connection beyond the floor is closed after this long unused
OUTAGE_WAIT = 3.0  # seconds a read waits for an unavailable database before it reports the outage


class ReaderPool:
    def __init__(self, open_conn: Callable[[], Conn], size: int = SIZE, *, floor: int = FLOOR, idle: float = IDLE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._open = open_conn
        self._idle: list[tuple[Conn, float]] = []  # (connection, when it was put back); the oldest first
        self._limiter = anyio.CapacityLimiter(size)
        self._floor = min(floor, size)
        self._idle_after = idle
        self._clock = clock
        self._closed = False
        self.connections = 0  # open now, in use or idle (never more than ``size``)

    async def run(self, fn: Callable[[Conn], T]) -> T:
        """``fn(connection)`` in a worker thread; a connection that failed is closed rather than reused. While the
        database is unavailable (restarting) the read is tried again with a short jittered backoff, for up to
        :data:`OUTAGE_WAIT` seconds: a caller (an HTTP request) gets its answer after a brief restart, or the
        :class:`StoreUnavailable` / :class:`~polpo.store.read.Unavailable` error (the API answers 503) rather than a wait without end."""
        pause = Pause(self._clock, 0.2, 1.0)
        while True:
            try:
                return await self._run_once(fn)
            except (StoreUnavailable, Unavailable):  # a query's, or the connection's
                delay = pause.failed()
                if pause.waited() + delay > OUTAGE_WAIT:
                    raise
                await anyio.sleep(delay)

    async def _run_once(self, fn: Callable[[Conn], T]) -> T:
        if self._closed:
            raise StoreError("the reader pool is closed")
        async with self._limiter:  # a slot first, then a connection: never more connections than slots
            con = self._idle.pop()[0] if self._idle else None  # the most recently used: the others age out
            fresh = con is None
            con, result, error = await anyio.to_thread.run_sync(self._call, fn, con)
            if fresh and con is not None:
                self.connections += 1
            if con is not None:
                if error is None and not self._closed:
                    self._idle.append((con, self._clock()))
                else:
                    await self._close([con])
        await self.trim()
        if error is not None:
            raise error
        return result  # type: ignore[return-value]  # set whenever error is None

    def _call(self, fn: Callable[[Conn], T], con: Conn | None) -> tuple[Conn | None, T | None, BaseException | None]:
        try:
            if con is None:
                con = self._open()
            return con, fn(con), None
        except Exception as e:
            return con, None, e

    async def trim(self) -> None:
        """Close the connections idle for longer than ``idle`` seconds, keeping ``floor`` of them."""
        cutoff = self._clock() - self._idle_after
        stale: list[Conn] = []
        while len(self._idle) > self._floor and self._idle[0][1] <= cutoff:
            stale.append(self._idle.pop(0)[0])
        if stale:
            await self._close(stale)

    async def maintain(self) -> None:
        """Trim every half ``idle`` period until cancelled, so a burst's connections close without more calls."""
        while not self._closed:
            await anyio.sleep(self._idle_after / 2)
            await self.trim()

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        await self._close([con for con, _ in idle])

    async def _close(self, cons: list[Conn]) -> None:
        self.connections -= len(cons)
        with anyio.CancelScope(shield=True):  # a cancelled caller must not leave the connection open
            await anyio.to_thread.run_sync(_close_all, cons)


def _close_all(cons: list[Conn]) -> None:
    for con in cons:
        with contextlib.suppress(Exception):
            con.close()
