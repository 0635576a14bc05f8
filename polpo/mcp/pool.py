"""The daemon's MCP servers and each agent's: what outlives an attempt.

* :class:`McpPool` is the daemon's: each server's tool list, read once (by the first attempt that needs it, in its
  workspace) and kept, so a later attempt starts no server until its model calls one of its tools; and the shared
  servers (``shared = true``), one connection per agent hosted in the engine's task group until the daemon stops.
  At its start it ends the shared servers a previous life of the daemon left running (their marker says so).
* :class:`McpAgent` is one agent's list of servers (``[agents.X] mcp``): the tools it is shown, under their wire
  names, and what their configured values expand to (masked like its keys).

Neither imports the SDK (a second to load): a daemon whose agents use no server never loads it, and one that does
loads it with the first attempt's session (:mod:`polpo.mcp.session`).
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from polpo.config_tools import McpServerSettings, MissingVariable, expand, variables
from polpo.llm.secrets import scrubbed_env
from polpo.mcp.errors import McpStartError
from polpo.mcp.stdio_env import server_env
from polpo.mcp.tools import McpTool, offered, wire_names
from polpo.tools.marks import ATTEMPT_MARK, attempt_mark
from polpo.tools.procs import minimal_env
from polpo.tools.proctable import find_processes_with_env, terminate_group

if TYPE_CHECKING:
    from polpo.mcp.connection import Connection, Endpoint

log = logging.getLogger("polpo.mcp")

__all__ = ["McpAgent", "McpPool", "endpoint"]

SHARED_MARK = "mcp/"  # a shared server's marker: attempt_mark(state_dir, "mcp/AGENT/SERVER")


class McpPool:
    """The daemon's MCP servers (see the module docstring)."""

    def __init__(self, servers: Mapping[str, McpServerSettings], state_dir: Path, *, version: str = "0") -> None:
        self.servers = dict(servers)
        self.state_dir = state_dir
        self.version = version
        self.tools: dict[str, list[McpTool]] = {}  # server -> every tool it lists
        self._tg: TaskGroup | None = None
        self._shared: dict[tuple[str, str], Connection] = {}

    async def run(self) -> None:
        """Load the SDK in a worker thread (a second or more: not in the first attempt's time), then host the shared
        servers until cancelled (the engine's task group), and stop them."""
        if not self.servers:
            return
        await anyio.to_thread.run_sync(importlib.import_module, "polpo.mcp.session", abandon_on_cancel=True)
        if not any(s.shared for s in self.servers.values()):
            return
        await self.end_previous()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await anyio.sleep_forever()
        finally:
            self._tg = None
            self._shared.clear()

    async def end_previous(self) -> int:
        """End the shared servers a previous life of this daemon left running (killed -9, they were orphaned)."""
        groups = set()
        for pid in find_processes_with_env(ATTEMPT_MARK, attempt_mark(self.state_dir, SHARED_MARK), prefix=True):
            try:
                groups.add(os.getpgid(pid))
            except ProcessLookupError:
                continue
        for g in sorted(groups):
            await terminate_group(g, 2.0)
        if groups:
            log.warning("ended %d shared MCP server(s) a previous run of the daemon left running", len(groups))
        return len(groups)

    def shared(self, agent: str, name: str) -> Connection:
        """The agent's connection to its shared server ``name``."""
        key = (agent, name)
        conn = self._shared.get(key)
        if conn is None:
            if self._tg is None:
                raise McpStartError("shared servers run in the daemon's engine, which is not running")
            folder = self.state_dir / "mcp" / agent / name
            folder.mkdir(parents=True, exist_ok=True)
            mark = (ATTEMPT_MARK, attempt_mark(self.state_dir, f"{SHARED_MARK}{agent}/{name}"))
            from polpo.mcp.connection import Connection

            conn = self._shared[key] = Connection(endpoint(name, self.servers[name], folder, mark, ()), self._tg,
                                                  version=self.version)
        return conn


def endpoint(name: str, s: McpServerSettings, cwd: Path, marker: tuple[str, str] | None,
             roots: tuple[Path, ...]) -> Endpoint:
    """The server's endpoint for one owner; :class:`McpStartError` names a ``${VARIABLE}`` that is not set."""
    try:
        env = {k: expand(v) for k, v in s.env.items()}
        headers = {k: expand(v) for k, v in s.headers.items()}
    except MissingVariable as e:
        raise McpStartError(f"the variable {e} named in [mcp.servers.{name}] is not set in the daemon's "
                            "environment") from None
    from polpo.mcp.connection import Endpoint

    return Endpoint(name, s, cwd, server_env(scrubbed_env(minimal_env()), env, marker), headers, roots)


class McpAgent:
    """One agent's MCP servers (see the module docstring)."""

    def __init__(self, agent: str, names: Sequence[str], pool: McpPool, *, taken: Sequence[str] = ()) -> None:
        self.agent = agent
        self.names = tuple(names)
        self.pool = pool
        self.taken = tuple(taken)  # tool names the agent has already (the built-in ones)
        self._wired: dict[str, McpTool] | None = None

    def secrets(self) -> list[str]:
        """The values its servers' ``${VARIABLE}``s expand to now: masked in what the agent records."""
        found = []
        for name in self.names:
            s = self.pool.servers[name]
            for text in (*s.env.values(), *s.headers.values()):
                found += [os.environ[v] for v in variables(text) if os.environ.get(v)]
        return found

    def listed(self) -> bool:
        return all(n in self.pool.tools for n in self.names)

    def wired(self) -> dict[str, McpTool]:
        """Its tools under their wire names (once every server's list is known)."""
        if self._wired is None:
            tools: list[McpTool] = []
            for name in self.names:
                s = self.pool.servers[name]
                tools += offered(self.pool.tools[name], s.allow, s.deny)
            self._wired = wire_names(tools, self.taken)
        return self._wired

