"""The ``glob`` tool: workspace paths matching a pattern (see :mod:`polpo.tools.patterns`), at most
:data:`MAX_GLOB_RESULTS`, found by a bounded walk (:mod:`polpo.tools.walk`)."""

from __future__ import annotations

import threading
import time

from pydantic import Field

from polpo.tools.fileio import PATH_NOTE
from polpo.tools.output import ToolOutput
from polpo.tools.patterns import PathPattern, check_pattern, expand_braces
from polpo.tools.registry import Tool, ToolArgs, ToolContext
from polpo.tools.sandbox import Sandbox
from polpo.tools.walk import SEARCH_TIME_BUDGET, WalkReport, bounded_search, walk

__all__ = ["GLOB", "MAX_GLOB_RESULTS", "GlobArgs", "glob"]

MAX_GLOB_RESULTS = 200


async def glob(sb: Sandbox, pattern: str, *, time_budget: float = SEARCH_TIME_BUDGET) -> ToolOutput:
    """Workspace-relative paths matching ``pattern`` (``*``, ``?``, ``[…]``, ``**``, ``{a,b}``); dirs end in ``/``."""
    return await bounded_search(
        "glob", lambda stop: _glob_sync(sb, pattern, time.monotonic() + time_budget, stop), time_budget
    )


def _glob_sync(sb: Sandbox, pattern: str, deadline: float, stop: threading.Event) -> ToolOutput:
    check_pattern(pattern, "pattern")
    patterns = [PathPattern(p) for p in expand_braces(pattern)]
    patterns = [p for p in patterns if p.size] or [PathPattern("*")]
    report = WalkReport()
    found: list[str] = []
    truncated = False
    for rel, _real, is_dir in walk(sb, sb.root, patterns, deadline, stop, report):
        if len(found) >= MAX_GLOB_RESULTS:
            truncated = True
            break
        found.append(rel + "/" if is_dir else rel)
    lines = list(found) if found else [f"no paths match {pattern!r}"]
    if truncated:
        lines.append(f"[truncated: first {MAX_GLOB_RESULTS} matches shown; use a narrower pattern]")
    if report.timed_out:
        lines.append("[partial: the search time budget ran out; the list may be incomplete — narrow the pattern]")
    return ToolOutput(
        ok=True,
        text="\n".join(lines),
        data={"pattern": pattern, "paths": found, "truncated": truncated, "partial": report.timed_out},
    )


class GlobArgs(ToolArgs):
    pattern: str = Field(description=f"Glob pattern. {PATH_NOTE}")


async def _run(ctx: ToolContext, args: GlobArgs) -> ToolOutput:
    return await glob(ctx.sandbox, args.pattern)


GLOB = Tool(
    name="glob",
    description="Find workspace paths matching a glob pattern: '*' and '?' within one path segment, '**' for any "
    "number of directories, '[abc]' classes, '{a,b}' alternatives (e.g. 'src/**/*.py', '*.{ts,tsx}'). "
    f"Directories end in '/'. At most {MAX_GLOB_RESULTS} results; .git and node_modules are skipped.",
    args=GlobArgs,
    handler=_run,
    read_only=True,
)
