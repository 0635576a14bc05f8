"""Read-only queries from async code (the HTTP API, metrics, traces) without blocking the event loop.

The queries in :mod:`polpo.store.read` are synchronous; each call here runs one of them in a worker thread, on a
connection of a small pool (at most ``size`` at once), so a slow read never stalls the daemon's writer or its
tasks, and a 10 000-row answer is assembled off the loop.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import TypeVar

import anyio

from polpo.store.errors import StoreError
from polpo.store.read import Conn

log = logging.getLogger("polpo.store")

__all__ = ["ReaderPool"]

T = TypeVar("T")


class ReaderPool:
    def __init__(self, open_conn: Callable[[], Conn], size: int = 4) -> None:
        self._open = open_conn
        self._idle: list[Conn] = []
        self._limiter = anyio.CapacityLimiter(size)
        self._closed = False

    async def run(self, fn: Callable[[Conn], T]) -> T:
        """``fn(connection)`` in a worker thread; a connection that failed is closed rather than reused."""
        if self._closed:
            raise StoreError("the reader pool is closed")
        con = self._idle.pop() if self._idle else None
        con, result, error = await anyio.to_thread.run_sync(self._call, fn, con, limiter=self._limiter)
        if con is not None:
            if error is None and not self._closed:
                self._idle.append(con)
            else:
                await anyio.to_thread.run_sync(_close, con)
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

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for con in idle:
            await anyio.to_thread.run_sync(_close, con)


def _close(con: Conn) -> None:
    with contextlib.suppress(Exception):
        con.close()
