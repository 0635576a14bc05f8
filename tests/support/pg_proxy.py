"""A TCP proxy between a client and PostgreSQL that can lose a COMMIT, as a dropped connection does, or stop
forwarding altogether while it keeps every socket open, as a cut cable, a dead NAT or a migrated VM does.

It reads the client's side of the protocol (a startup message, then typed messages: a type byte and a length)
and, when armed, acts on the next simple-query ``COMMIT``:

- ``"lose_commit"``: the COMMIT never reaches the server; both connections are closed (the server rolls back);
- ``"lose_answer"``: the COMMIT reaches the server, the proxy waits for the server's answer and closes the
  client's connection without passing it on (the transaction is committed, the client cannot know).

:meth:`PgProxy.blackhole` cuts the way without a FIN or an RST: nothing more is passed on in either direction, the
sockets stay open (what was sent waits in them), and a new connection is accepted but never reaches the server.
Neither end can tell a cut from a slow peer; PostgreSQL keeps the client's session (and its locks) until TCP gives
up, which the proxy's own kernel, answering every keepalive probe, never lets happen. :meth:`PgProxy.heal` lets
everything through again, what waited first.

The client must not use TLS through it (``ssl=False``): the proxy reads the messages. :class:`ProxyThread` runs
one in a thread of its own, for tests that drive daemons in other processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from collections.abc import Iterator
from typing import Literal

__all__ = ["PgProxy", "ProxyThread", "proxied"]

Mode = Literal["lose_commit", "lose_answer"]


class PgProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self.armed: Mode | None = None
        self.fired = 0  # COMMITs lost so far
        self._server: asyncio.AbstractServer | None = None
        self._streams: set[asyncio.StreamWriter] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def blackhole(self) -> None:
        """From now on nothing passes, and nothing is closed (in the proxy's event loop)."""
        self._flowing.clear()

    def heal(self) -> None:
        self._flowing.set()

    async def close(self) -> None:
        self._flowing.set()
        for w in list(self._streams):
            w.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        # a handler cancelled when the proxy closes returns quietly (asyncio logs an error for a cancelled one)
        with contextlib.suppress(asyncio.CancelledError):
            await self._serve(c_reader, c_writer)

    async def _serve(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        self._streams.add(c_writer)
        await self._flowing.wait()  # a connection made during a cut never reaches the server
        try:
            s_reader, s_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            c_writer.close()
            self._streams.discard(c_writer)
            return
        self._streams.add(s_writer)
        back = asyncio.ensure_future(self._pump(s_reader, c_writer))
        try:
            head = await c_reader.readexactly(4)  # the startup message: a length and no type byte
            (n,) = struct.unpack("!I", head)
            await self._pass(s_writer, head + await c_reader.readexactly(n - 4))
            while True:
                kind = await c_reader.readexactly(1)
                size = await c_reader.readexactly(4)
                body = await c_reader.readexactly(struct.unpack("!I", size)[0] - 4)
                if self.armed is not None and kind == b"Q" and body.lstrip().upper().startswith(b"COMMIT"):
                    mode, self.armed = self.armed, None
                    self.fired += 1
                    if mode == "lose_answer":
                        back.cancel()  # the server's answer is read here and never passed on
                        s_writer.write(kind + size + body)
                        await s_writer.drain()
                        with contextlib.suppress(asyncio.TimeoutError):
                            await asyncio.wait_for(s_reader.read(65536), 10)
                    return
                await self._pass(s_writer, kind + size + body)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            back.cancel()
            for w in (c_writer, s_writer):
                w.close()
                self._streams.discard(w)

    async def _pass(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        await self._flowing.wait()
        writer.write(data)
        await writer.drain()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            while data := await reader.read(65536):
                await self._pass(writer, data)
        writer.close()



class ProxyThread:
    """A :class:`PgProxy` in a thread of its own (its own event loop), driven from synchronous code."""

    def __init__(self, upstream_port: int) -> None:
        self.proxy = PgProxy(upstream_port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="pg-proxy", daemon=True)

    @property
    def port(self) -> int:
        return self.proxy.port

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.proxy.start(), self._loop).result(10)

    def blackhole(self) -> None:
        self._loop.call_soon_threadsafe(self.proxy.blackhole)

    def heal(self) -> None:
        self._loop.call_soon_threadsafe(self.proxy.heal)

    async def _close(self) -> None:
        await self.proxy.close()
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in rest:
            t.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


@contextlib.contextmanager
def proxied(url: str, upstream_port: int) -> Iterator[tuple[ProxyThread, str]]:
    """A :class:`ProxyThread` in front of the server at ``upstream_port``, and ``url`` rewritten to go through it."""
    p = ProxyThread(upstream_port)
    p.start()
    try:
        yield p, url.replace(f":{upstream_port}/", f":{p.port}/") + "?sslmode=disable"
    finally:
        p.close()
