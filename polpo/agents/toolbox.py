"""What one LLM agent attempt can call, and which calls wait for a person.

Three kinds of tools: the built-in ones (:data:`polpo.tools.catalog.TOOLS`), the tools of the agent's MCP servers
(:mod:`polpo.mcp`, named ``SERVER.TOOL``, shown to the model as ``SERVER__TOOL``) and ``ask_human``
(:mod:`polpo.tools.ask`) when the agent may ask. A call is first *bound* — its arguments decoded and validated
against the tool's schema, a wrong one coming back as the model's ``Error:`` — so what a person is asked to approve
is a call that can run; then it runs. A call waits for approval when ``approve_tools`` names it (a name or a glob:
``git.git_commit``, ``fs.*``, ``run_command``); ``ask_human`` always waits for its answer.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from polpo.mcp.tools import McpTool, check_arguments
from polpo.tools.ask import ASK_HUMAN
from polpo.tools.catalog import TOOLS
from polpo.tools.output import ToolError, ToolOutput, fail
from polpo.tools.registry import Tool, ToolArgs, ToolContext, ToolRegistry

if TYPE_CHECKING:
    from polpo.mcp.session import McpSession

__all__ = ["Bound", "Toolbox", "base_tools"]


def base_tools(ask_human: bool) -> ToolRegistry:
    """The built-in tools an agent has, ``ask_human`` among them when it may ask."""
    return ToolRegistry([*TOOLS, ASK_HUMAN]) if ask_human else TOOLS


@dataclass(frozen=True)
class Bound:
    """A model's call, bound: its name for people, its valid arguments, and what runs it."""

    name: str  # write_file | git.git_status | ask_human
    arguments: dict[str, Any]
    builtin: tuple[Tool[Any], ToolArgs] | None = None
    mcp: McpTool | None = None


class Toolbox:
    """One attempt's tools (see the module docstring); ``async with`` it around the conversation (its MCP
    servers stop when it closes)."""

    def __init__(self, context: ToolContext, builtin: ToolRegistry, schemas: list[dict[str, Any]],
                 mcp: McpSession | None, approve: Sequence[str]) -> None:
        self.context = context
        self.builtin = builtin
        self.base_schemas = schemas
        self.mcp = mcp
        self.approve = tuple(approve)

    async def __aenter__(self) -> Toolbox:
        if self.mcp is not None:
            await self.mcp.__aenter__()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self.mcp is not None:
            await self.mcp.__aexit__(et, e, tb)

    async def prepare(self) -> None:
        """Learn the MCP servers' tools (:class:`polpo.mcp.session.McpStartError` when one cannot start)."""
        if self.mcp is not None:
            await self.mcp.prepare()

    def schemas(self) -> list[dict[str, Any]]:
        """What the model is shown (the built-in list is the agent's own, not copied per attempt)."""
        return self.base_schemas if self.mcp is None else [*self.base_schemas, *self.mcp.schemas()]

    def name_of(self, wire: str) -> str:
        """A called name as people read it (``git__status`` → ``git.status``)."""
        tool = self.mcp.lookup(wire) if self.mcp is not None else None
        return tool.qualified if tool is not None else wire

    def bind(self, wire: str, arguments: str | Mapping[str, Any] | None) -> Bound | ToolOutput:
        tool = self.mcp.lookup(wire) if self.mcp is not None else None
        if tool is not None:
            try:
                return Bound(tool.qualified, check_arguments(tool, arguments), mcp=tool)
            except ToolError as exc:
                return fail(str(exc), exc.kind, tool=tool.qualified, server=tool.server)
        bound = self.builtin.bound(wire, arguments)
        if isinstance(bound, ToolOutput):
            if bound.data.get("error") == "unknown_tool" and self.mcp is not None:
                names = [*self.builtin.names, *(t.qualified for t in self.mcp.agent.wired().values())]
                return fail(f"unknown tool {wire!r}; available tools: {', '.join(names)}", "unknown_tool", tool=wire)
            return bound
        return Bound(wire, bound[1].model_dump(mode="json", exclude_unset=True), builtin=bound)

    def needs_approval(self, call: Bound) -> bool:
        return any(fnmatch.fnmatchcase(call.name, p) for p in self.approve)

    async def run(self, call: Bound) -> ToolOutput:
        """Run a bound call (an MCP server that cannot start raises, ending the attempt)."""
        if call.mcp is not None:
            assert self.mcp is not None
            return await self.mcp.call(call.mcp, call.arguments)
        assert call.builtin is not None
        return await self.builtin.run(self.context, *call.builtin)
