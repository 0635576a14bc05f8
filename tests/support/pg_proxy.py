"""A TCP proxy between a client and PostgreSQL that can lose a COMMIT, as a dropped connection does.

It reads the client's side of the protocol (a startup message, then typed messages: a type byte and a length)
and, when armed, acts on the next simple-query ``COMMIT``:

- ``"lose_commit"``: the COMMIT never reaches the server; both connections are closed (the server rolls back);
- ``"lose_answer"``: the COMMIT reaches the server, the proxy waits for the server's answer and closes the
  client's connection without passing it on (the transaction is committed, the client cannot know).

The client must not use TLS through it (``ssl=False``): the proxy reads the messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from typing import Literal

__all__ = ["CommitLosingProxy"]

Mode = Literal["lose_commit", "lose_answer"]


class CommitLosingProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self.armed: Mode | None = None
        self.fired = 0  # COMMITs lost so far
        self._server: asyncio.AbstractServer | None = None
        self._streams: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        for w in list(self._streams):
            w.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        s_reader, s_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self._streams |= {c_writer, s_writer}
        back = asyncio.ensure_future(self._pump(s_reader, c_writer))
        try:
            head = await c_reader.readexactly(4)  # the startup message: a length and no type byte
            (n,) = struct.unpack("!I", head)
            s_writer.write(head + await c_reader.readexactly(n - 4))
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
                s_writer.write(kind + size + body)
                await s_writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            back.cancel()
            for w in (c_writer, s_writer):
                w.close()
                self._streams.discard(w)

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()
