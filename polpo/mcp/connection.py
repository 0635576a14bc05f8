"""One MCP server's connection: started when first needed, a timeout on every call, restarted after it broke.

The SDK's ``Client`` must be entered and left in one task, and a call may come from any task, so each connection
lives in a *host* task of its owner's task group (the attempt's, or the daemon's for a shared server): the host
enters the client, hands it over, and leaves it — which stops the server — when told to. What a call can meet:

* the server does not answer within ``timeout``: the call fails with that reason and the server is stopped (a
  server that hung once is not trusted with the next call); the next call starts it again;
* the server exits mid-call (crashed, killed), or its stdout breaks the protocol: the call fails at once with the
  reason (its exit status, the line it wrote, the end of its stderr), and the next call starts it again;
* the server answers with an error, or with something that is not a result: the call fails with its message and the
  connection stays.

None of these raise past the caller as anything but :class:`McpCallError`; a server that cannot start, or cannot
finish its handshake within ``start_timeout``, is :class:`McpStartError` (the attempt fails with it). A failing
server never takes its owner's task group down: the host swallows what its connection's end raises.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types
from anyio.abc import TaskGroup, TaskStatus
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from polpo.config_tools import McpServerSettings
from polpo.mcp.errors import McpCallError, McpStartError
from polpo.mcp.stdio import ServerStartError, Spawned, stdio_transport
from polpo.mcp.tools import McpTool, tool_of

log = logging.getLogger("polpo.mcp")

__all__ = ["Connection", "Endpoint", "McpCallError", "McpStartError"]

MAX_TOOL_PAGES = 50


@dataclass(frozen=True)
class Endpoint:
    """How one owner reaches one server: the settings with the environment and headers made for it."""

    name: str
    settings: McpServerSettings
    cwd: Path  # a stdio server's folder
    env: Mapping[str, str]  # a stdio server's whole environment
    headers: Mapping[str, str]  # an HTTP server's headers
    roots: tuple[Path, ...] = ()  # what the server is told it may work on (the workspace)

    @property
    def where(self) -> str:
        return f"MCP server {self.name!r}"


class Connection:
    """One server for one owner (see the module docstring); ``tg`` hosts its connection."""

    def __init__(self, endpoint: Endpoint, tg: TaskGroup, *, version: str = "0") -> None:
        self.endpoint = endpoint
        self.tg = tg
        self.version = version
        self._client: Client | None = None
        self._spawned: Spawned | None = None
        self._done: anyio.Event | None = None
        self._lock = anyio.Lock()
        self.starts = 0

    # -- lifecycle ------------------------------------------------------------------------------------------
    async def client(self) -> Client:
        """The connected client, starting the server first when it is not running."""
        async with self._lock:
            if self._client is not None and self._spawned is not None and not self._spawned.running:
                self.stop()  # it exited since its last call: start it again rather than fail this one
            if self._client is None:
                self._client = await self.tg.start(self._host)
                self.starts += 1
            return self._client

    def stop(self) -> None:
        """Leave the client (its host stops the server); the next :meth:`client` starts it again."""
        if self._done is not None:
            self._done.set()
        self._client, self._done = None, None

    async def _host(self, *, task_status: TaskStatus[Client]) -> None:
        done = anyio.Event()
        started = False
        timeout = self.endpoint.settings.start_timeout.total_seconds()
        try:
            # a deadline on the start only, lifted once connected (the client's own scopes nest inside this one)
            with anyio.CancelScope(deadline=anyio.current_time() + timeout) as scope:
                async with AsyncExitStack() as stack:
                    client = await self._connect(stack)
                    scope.deadline = math.inf
                    self._done = done
                    task_status.started(client)
                    started = True
                    await done.wait()
            if scope.cancelled_caught and not started:
                raise McpStartError(self._with_stderr(f"it did not finish its start (handshake) within {timeout:g} s"))
        except McpStartError:
            if not started:
                raise
        except Exception as exc:  # its end (a crashed server…) is the call's business, never the owner's
            if not started:
                if self._spawned is not None:
                    await self._spawned.settle()
                raise McpStartError(self._start_reason(exc)) from None
            log.debug("%s: its connection ended with %r", self.endpoint.where, exc)

    async def _connect(self, stack: AsyncExitStack) -> Client:
        s = self.endpoint.settings
        transport: Any
        if s.command is not None:
            self._spawned = spawned = Spawned([s.command, *s.args])
            transport = stdio_transport(spawned, cwd=self.endpoint.cwd, env=self.endpoint.env)
        else:
            import httpx2  # the SDK's HTTP client; only for an HTTP server
            from mcp.client.streamable_http import streamable_http_client

            assert s.url is not None
            http = await stack.enter_async_context(httpx2.AsyncClient(
                headers=dict(self.endpoint.headers), timeout=httpx2.Timeout(30.0, read=s.timeout.total_seconds())))
            transport = streamable_http_client(s.url, http_client=http)
        try:
            return await stack.enter_async_context(Client(
                transport, mode="auto", cache=None, list_roots_callback=self._roots,
                client_info=mcp_types.Implementation(name="polpo", version=self.version)))
        except ServerStartError as exc:
            raise McpStartError(str(exc)) from None

    async def _roots(self, context: ClientRequestContext) -> mcp_types.ListRootsResult | mcp_types.ErrorData:
        """The folders the server may work on: the task's workspace (a filesystem server limits itself to it)."""
        return mcp_types.ListRootsResult(roots=[mcp_types.Root.model_validate({"uri": p.as_uri(), "name": p.name})
                                                for p in self.endpoint.roots])

    # -- requests -------------------------------------------------------------------------------------------
    async def tools(self) -> list[McpTool]:
        """Every tool the server lists (all pages), within ``start_timeout``."""
        client = await self.client()
        out: list[McpTool] = []
        cursor: str | None = None
        try:
            with anyio.fail_after(self.endpoint.settings.start_timeout.total_seconds()):
                for _ in range(MAX_TOOL_PAGES):
                    page = await client.list_tools(cursor=cursor)
                    out += [tool_of(self.endpoint.name, t) for t in page.tools]
                    cursor = page.next_cursor
                    if not cursor:
                        break
        except (TimeoutError, MCPError, ValidationError) as exc:
            self.stop()
            raise McpStartError(f"its tool list failed: {self._failure(exc)}") from None
        return out

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> mcp_types.CallToolResult:
        """One ``tools/call``; :class:`McpCallError` (or :class:`McpStartError`) when there is no result."""
        client = await self.client()
        try:
            with anyio.fail_after(self.endpoint.settings.timeout.total_seconds()):
                return await client.call_tool(tool, dict(arguments))
        except (TimeoutError, MCPError, ValidationError) as exc:
            gone = isinstance(exc, MCPError) and exc.code == mcp_types.CONNECTION_CLOSED
            if gone and self._spawned is not None:
                await self._spawned.settle()  # its end of stdout may come before its exit status: say which
            reason = self._failure(exc)
            if gone or isinstance(exc, TimeoutError):
                self.stop()  # hung, gone or broken: not trusted with the next call
            raise McpCallError(reason) from None

    # -- reasons --------------------------------------------------------------------------------------------
    def _failure(self, exc: Exception) -> str:
        timeout = self.endpoint.settings.timeout.total_seconds()
        if isinstance(exc, TimeoutError):
            return self._with_stderr(f"it did not answer within {timeout:g} s; polpo stopped it (the next call "
                                     "starts it again)")
        if isinstance(exc, ValidationError):
            return f"its answer is not a valid result: {str(exc).splitlines()[0][:300]}"
        if isinstance(exc, MCPError) and exc.code == mcp_types.CONNECTION_CLOSED:
            return self._gone() + " (the next call starts it again)"
        if isinstance(exc, MCPError):
            return f"it refused the call: {exc.error.message} (error {exc.code})"
        return f"{type(exc).__name__}: {exc}"

    def _gone(self) -> str:
        """Why the connection closed under a call."""
        sp = self._spawned
        if sp is not None and sp.garbage is not None:
            return (f"it wrote something that is not an MCP message on its stdout ({sp.garbage!r}); stdout carries "
                    "only the protocol's messages, so the connection was closed")
        if sp is not None and sp.exit_text() is not None:
            return self._with_stderr(f"it {sp.exit_text()} during the call")
        if sp is not None:
            return self._with_stderr("it closed its stdout during the call (it probably crashed)")
        return "the connection to it closed"

    def _start_reason(self, exc: BaseException) -> str:
        if isinstance(exc, MCPError) and exc.code == mcp_types.CONNECTION_CLOSED:
            sp = self._spawned
            if sp is not None and sp.garbage is not None:
                return (f"it wrote something that is not an MCP message on its stdout ({sp.garbage!r}); stdout "
                        "carries only the protocol's messages")
            exit_text = sp.exit_text() if sp is not None else None
            return self._with_stderr(f"it {exit_text} before its handshake" if exit_text
                                     else "it closed the connection before its handshake")
        if isinstance(exc, MCPError):
            return f"its handshake failed: {exc.error.message} (error {exc.code})"
        if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            return self._start_reason(exc.exceptions[0])
        return self._with_stderr(f"{type(exc).__name__}: {exc}")

    def _with_stderr(self, text: str) -> str:
        tail = self._spawned.stderr_text() if self._spawned is not None else ""
        return f"{text}; its stderr: {tail}" if tail else text
