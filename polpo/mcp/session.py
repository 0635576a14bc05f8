"""One attempt's MCP servers: their connections, hosted in a task group of the attempt's own, started when first
needed in the task's workspace with the attempt's marker, and stopped — their process groups killed — when the
attempt ends (a timeout, a cancel, the daemon's kill included). Shared servers are the pool's (:mod:`.pool`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup

from polpo.mcp.connection import Connection
from polpo.mcp.errors import McpCallError, McpStartError
from polpo.mcp.pool import McpAgent, endpoint
from polpo.mcp.stdio_env import resolve_cwd
from polpo.mcp.tools import McpTool, result_text
from polpo.tools.output import ToolOutput, fail

__all__ = ["McpSession"]


class McpSession:
    """One attempt's MCP servers (see the module docstring); ``async with`` it around the conversation."""

    def __init__(self, agent: McpAgent, workspace: Path, marker: tuple[str, str] | None) -> None:
        self.agent = agent
        self.workspace = workspace
        self.marker = marker
        self._tg: TaskGroup | None = None
        self._tg_cm: Any = None
        self._own: dict[str, Connection] = {}
        self.calls: dict[str, list[float]] = {}  # server -> [calls, errors, seconds]

    async def __aenter__(self) -> McpSession:
        self._tg_cm = anyio.create_task_group()
        self._tg = await self._tg_cm.__aenter__()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        for conn in self._own.values():
            conn.stop()
        self._own.clear()
        result: bool | None = await self._tg_cm.__aexit__(et, e, tb)
        return result

    def _conn(self, name: str) -> Connection:
        s = self.agent.pool.servers[name]
        if s.shared:
            return self.agent.pool.shared(self.agent.agent, name)
        conn = self._own.get(name)
        if conn is None:
            assert self._tg is not None, "use the session with async with"
            cwd = resolve_cwd(self.workspace, s.cwd)
            conn = self._own[name] = Connection(endpoint(name, s, cwd, self.marker, (self.workspace,)), self._tg,
                                                version=self.agent.pool.version)
        return conn

    async def prepare(self) -> None:
        """Learn the tools of every server whose list the daemon does not have yet (starting it, here)."""
        for name in self.agent.names:
            if name not in self.agent.pool.tools:
                try:
                    self.agent.pool.tools[name] = await self._conn(name).tools()
                except McpStartError as e:
                    raise McpStartError(f"MCP server {name!r} could not start: {e}") from None

    def schemas(self) -> list[dict[str, Any]]:
        return [t.function(wire) for wire, t in self.agent.wired().items()]

    def lookup(self, wire: str) -> McpTool | None:
        return self.agent.wired().get(wire)

    async def call(self, tool: McpTool, arguments: Mapping[str, Any]) -> ToolOutput:
        """Run one call; a failure is the model's ``Error:``, except a server that cannot start
        (:class:`McpStartError`, which ends the attempt)."""
        start = time.monotonic()
        stats = self.calls.setdefault(tool.server, [0, 0, 0.0])
        try:
            try:
                result = await self._conn(tool.server).call(tool.name, arguments)
            except McpStartError as e:
                raise McpStartError(f"MCP server {tool.server!r} could not start: {e}") from None
            except McpCallError as e:
                stats[1] += 1
                return fail(f"{tool.qualified}: the MCP server {tool.server!r} gave no result: {e}", "mcp",
                            server=tool.server, seconds=round(time.monotonic() - start, 4))
            text = result_text(result)
            data = {"server": tool.server, "seconds": round(time.monotonic() - start, 4)}
            if result.is_error:
                stats[1] += 1
                return fail(f"{tool.qualified}: {text or 'the tool failed and said nothing more'}", "tool_error",
                            **data)
            return ToolOutput(True, text or "(the tool returned nothing)", data)
        finally:
            stats[0] += 1
            stats[2] += time.monotonic() - start

    def summary(self) -> dict[str, dict[str, float]] | None:
        """``{server: {calls, errors, seconds}}`` of this attempt's calls (None: none)."""
        return {s: {"calls": int(c), "errors": int(e), "seconds": round(t, 4)} for s, (c, e, t) in
                self.calls.items()} or None
