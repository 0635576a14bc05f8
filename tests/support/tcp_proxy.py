"""A TCP proxy whose network a test controls: a half-open cut (blackhole), a reset, added latency.

One node's way to PostgreSQL goes through it (its config's URL names the proxy's port), so a fault between that
node and the database touches no other node. It runs in a thread of its own with its own event loop, so a
synchronous test, an async one or the nemesis (tests/nemesis) can drive it alike; every method is thread-safe
and returns at once.

- :meth:`blackhole`: nothing passes either way and every socket stays open — a cut cable, a dead NAT, a migrated
  VM: no FIN, no RST, so neither side learns anything. Bytes sent meanwhile wait (in the proxy and the kernels'
  buffers) and arrive after :meth:`heal`, as TCP's retransmissions deliver them after a cut shorter than its
  timeout. A connection opened meanwhile is accepted (the client's kernel completes the handshake with the
  proxy's) but reaches the server only after the heal.
- :meth:`reset`: every open connection is closed with an RST on both sides (a middlebox that forgot them);
  new ones pass.
- :meth:`latency`: every chunk is delivered that many seconds after it was read, both ways.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from dataclasses import dataclass, field

__all__ = ["TcpProxy"]


@dataclass(eq=False)  # hashed by identity: kept in a set
class _Pair:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class TcpProxy:
    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.connections = 0  # accepted so far
        self._loop = asyncio.new_event_loop()
        self._open = asyncio.Event()  # set: bytes pass; clear: blackholed
        self._delay = 0.0
        self._refusing = False  # set: every new connection is reset at once (a server restarting, a firewall)
        self._pairs: set[_Pair] = set()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-proxy", daemon=True)

    # -- control (any thread) ------------------------------------------------------------------------------
    def start(self) -> TcpProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def blackhole(self) -> None:
        self._loop.call_soon_threadsafe(self._open.clear)

    def heal(self) -> None:
        """Undo :meth:`blackhole` and :meth:`latency`."""
        def go() -> None:
            self._delay = 0.0
            self._open.set()
        self._loop.call_soon_threadsafe(go)

    def latency(self, seconds: float) -> None:
        def go() -> None:
            self._delay = seconds
        self._loop.call_soon_threadsafe(go)

    def refuse(self) -> None:
        """From now on every new connection is reset as soon as it is accepted (until :meth:`allow`)."""
        def go() -> None:
            self._refusing = True
        self._loop.call_soon_threadsafe(go)

    def allow(self) -> None:
        """Undo :meth:`refuse`."""
        def go() -> None:
            self._refusing = False
        self._loop.call_soon_threadsafe(go)

    def reset(self) -> int:
        """RST every open connection (both sides); how many were open."""
        return asyncio.run_coroutine_threadsafe(self._reset(), self._loop).result(10)

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the loop's side -----------------------------------------------------------------------------------
    async def _start(self) -> None:
        self._open.set()
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._reset()
        # what is still running (a connection waiting for a heal, the pumps just cancelled) ends here, on a running
        # loop: left to the loop's close, each would be destroyed pending and its socket closed on a closed loop
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in rest:
            t.cancel()
        await asyncio.gather(*rest, return_exceptions=True)
        await asyncio.sleep(0)  # the transports' connection_lost callbacks, scheduled by the aborts

    async def _reset(self) -> int:
        pairs = list(self._pairs)
        for pair in pairs:
            for w in (pair.client, pair.server):
                if w is not None:
                    _abort(w)
            for t in pair.tasks:
                t.cancel()
        self._pairs.clear()
        return len(pairs)

    async def _handle(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        if self._refusing:
            _abort(c_writer)
            return
        pair = _Pair(c_writer)
        self._pairs.add(pair)
        try:
            await self._open.wait()  # a connection opened during a cut reaches the server after the heal
            s_reader, s_writer = await asyncio.open_connection(*self.upstream)
        except (OSError, asyncio.CancelledError):
            _abort(c_writer)
            self._pairs.discard(pair)
            return
        pair.server = s_writer
        pair.tasks = [asyncio.ensure_future(self._pump(c_reader, s_writer)),
                      asyncio.ensure_future(self._pump(s_reader, c_writer))]
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait(pair.tasks, return_when=asyncio.FIRST_COMPLETED)
        for t in pair.tasks:
            t.cancel()
        for w in (c_writer, s_writer):
            w.close()
        self._pairs.discard(pair)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                due = loop.time() + self._delay
                await self._open.wait()  # blackholed: hold it (and read nothing more) until the heal
                if (wait := due - loop.time()) > 0:
                    await asyncio.sleep(wait)
                await self._open.wait()
                writer.write(data)
                await writer.drain()
            writer.write_eof()


def _abort(w: asyncio.StreamWriter) -> None:
    """Close with an RST (SO_LINGER 0), not a FIN."""
    sock = w.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    w.transport.abort()
