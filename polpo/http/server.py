"""uvicorn inside the daemon: the socket is bound at start-up (a taken port stops the start, with the reason),
then the server runs as one task of the daemon's task group, in its event loop.

uvicorn's own signal handling is off: the daemon owns SIGTERM/SIGINT/SIGHUP and stops the server itself.
Its bounds come from ``[http]``: the header and body read timeouts (:mod:`polpo.http.timeouts`) and the cap
on connections served at once (uvicorn's ``limit_concurrency``, which answers 503 past it).
``<state_dir>/http.json`` says where the API listens (``{"url", "pid", "token"}``), so the CLI of the same
machine finds it (``polpo cancel`` and friends use it); it is removed when the daemon stops.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import anyio
import uvicorn
from starlette.types import ASGIApp

from polpo.config import HttpSettings
from polpo.http.auth import HttpPlan
from polpo.http.timeouts import timed_protocol

__all__ = ["HttpServer", "endpoint_file"]

GRACE = 3.0  # seconds open connections get to finish when the daemon stops


def endpoint_file(state_dir: Path) -> Path:
    return state_dir / "http.json"


def concurrency_limit(max_connections: int) -> int:
    """uvicorn's ``limit_concurrency`` for ``max_connections`` served: it answers 503 to a request once the open
    connections (this one included) or running requests reach the limit, so the limit is one more."""
    return max_connections + 1


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the daemon owns the signals


class HttpServer:
    def __init__(self, plan: HttpPlan, state_dir: Path, settings: HttpSettings) -> None:
        self.plan = plan
        self.settings = settings
        self.state_dir = state_dir
        self.sock: socket.socket | None = None
        self.url = ""
        self._server: _Server | None = None
        self._done = anyio.Event()

    def bind(self) -> None:
        """Listen now (OSError when the address is taken or not ours)."""
        host = "127.0.0.1" if self.plan.host == "localhost" else self.plan.host
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # the proto makes asyncio set TCP_NODELAY
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, self.plan.port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self.sock = sock
        port = sock.getsockname()[1]
        self.url = f"http://{'[' + host + ']' if family == socket.AF_INET6 else host}:{port}"
        path = endpoint_file(self.state_dir)
        tmp = path.with_name(".http.json.tmp")
        tmp.write_text(json.dumps({"url": self.url, "pid": os.getpid(), "token": self.plan.token is not None}))
        os.replace(tmp, path)

    async def serve(self, app: ASGIApp) -> None:
        assert self.sock is not None, "bind() first"
        s = self.settings
        protocol = timed_protocol(s.header_timeout.total_seconds(), s.body_timeout.total_seconds())
        config = uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False, http=protocol, ws="none",
                                timeout_graceful_shutdown=int(GRACE), server_header=False, proxy_headers=False,
                                limit_concurrency=concurrency_limit(s.max_connections))
        self._server = _Server(config)
        try:
            await self._server.serve(sockets=[self.sock])
        finally:
            self._done.set()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            with anyio.move_on_after(GRACE + 2):
                await self._done.wait()
        self.close()

    def close(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            endpoint_file(self.state_dir).unlink()
        if self.sock is not None:
            self.sock.close()
            self.sock = None
