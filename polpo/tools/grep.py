"""The ``grep`` tool: lines matching a Python regular expression, as ``file:line: text``, bounded.

It skips files larger than :data:`MAX_GREP_FILE_BYTES` and binary files, searches each line in its first
:data:`MAX_GREP_SEARCH_CHARS` characters, shows at most :data:`MAX_GREP_MATCHES` matches each cut to
:data:`MAX_GREP_LINE_CHARS`, and walks the tree within the search budget of :mod:`polpo.tools.walk`.

It refuses regexes with nested repeats (``(a+)+``): Python's ``re`` holds the GIL while it matches, so a
catastrophically backtracking pattern would stall the whole daemon, and no time budget could interrupt it.
(Other pathological shapes, such as overlapping alternatives under a repeat, ``(a|a)*``, are not detected.)
"""

from __future__ import annotations

import importlib
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import Field

from polpo.tools.fileio import PATH_NOTE, SNIFF_BYTES, is_binary, reader
from polpo.tools.output import ToolError, ToolOutput, fail
from polpo.tools.patterns import PathPattern, check_pattern, expand_braces
from polpo.tools.registry import Tool, ToolArgs, ToolContext
from polpo.tools.sandbox import Sandbox
from polpo.tools.walk import SEARCH_TIME_BUDGET, WalkReport, bounded_search, walk

__all__ = [
    "GREP",
    "MAX_GREP_FILE_BYTES",
    "MAX_GREP_LINE_CHARS",
    "MAX_GREP_MATCHES",
    "MAX_GREP_SEARCH_CHARS",
    "GrepArgs",
    "grep",
    "has_nested_repeat",
]

MAX_GREP_MATCHES = 100
MAX_GREP_FILE_BYTES = 2 * 1024 * 1024
MAX_GREP_LINE_CHARS = 400
MAX_GREP_SEARCH_CHARS = 10_000


async def grep(
    sb: Sandbox,
    pattern: str,
    path: str = ".",
    include: str | None = None,
    *,
    time_budget: float = SEARCH_TIME_BUDGET,
) -> ToolOutput:
    """Lines matching the Python regex ``pattern`` as ``file:line: text``, under ``path`` (a file or directory).

    ``include`` filters file names (``"*.py"``; with a ``/`` it is matched against the path relative to ``path``).
    """
    try:
        rx = re.compile(pattern)
    except (re.error, TypeError, ValueError, OverflowError, RecursionError) as exc:
        return fail(f"invalid regular expression {pattern!r}: {exc}", "invalid_arguments")
    if has_nested_repeat(pattern):
        return fail(
            f"regular expression {pattern!r} repeats a group that itself repeats (like '(a+)+'), which can take "
            "exponential time; simplify it (e.g. 'a+' instead of '(a+)+')",
            "unsafe_regex",
        )
    return await bounded_search(
        "grep",
        lambda stop: _grep_sync(sb, rx, path, include, time.monotonic() + time_budget, stop),
        time_budget,
    )


def has_nested_repeat(pattern: str) -> bool:
    """Whether a variable repeat sits inside another repeat (star height ≥ 2): the classic catastrophic-backtracking
    shape. ``re`` holds the GIL while matching, so such a pattern would freeze the whole process, not one thread;
    it is refused up front instead."""
    try:
        parser: Any = importlib.import_module("re._parser")
        tree: Any = parser.parse(pattern)
    except Exception:
        return False
    unbounded = parser.MAXREPEAT

    def visit(items: Any, inside: bool) -> bool:
        for op, av in items:
            name = str(op)
            if name in ("MAX_REPEAT", "MIN_REPEAT"):
                lo, hi, body = av
                repeats = hi == unbounded or hi > 1
                if inside and repeats and lo != hi:
                    return True
                if visit(body, inside or repeats):
                    return True
            elif name == "SUBPATTERN":
                if visit(av[3], inside):
                    return True
            elif name == "BRANCH":
                if any(visit(branch, inside) for branch in av[1]):
                    return True
            elif name in ("ASSERT", "ASSERT_NOT"):
                if visit(av[1], inside):
                    return True
            elif name == "GROUPREF_EXISTS" and any(visit(b, inside) for b in av[1:] if b is not None):
                return True
        return False

    try:
        return visit(tree, False)
    except Exception:  # an unexpected parser shape: do not block the search on our own analysis
        return False


def _files(
    sb: Sandbox, path: str, include: str | None, deadline: float, stop: threading.Event, report: WalkReport
) -> tuple[str, Iterator[tuple[str, Path, bool]]]:
    """The base's relative name and the files to search under it."""
    base = sb.resolve(path, must_exist=True)
    base_rel = sb.relative(base)
    if base.is_dir():
        if include:
            check_pattern(include, "include pattern")
            pats = [p if "/" in p else "**/" + p for p in expand_braces(include)]
        else:
            pats = ["**/*"]
        return base_rel, walk(sb, base, [PathPattern(p) for p in pats], deadline, stop, report)
    if base.is_file():
        return base_rel, iter([(base_rel, base, False)])
    raise ToolError(f"{base_rel!r} is neither a file nor a directory", "not_a_file")


def _grep_sync(
    sb: Sandbox, rx: re.Pattern[str], path: str, include: str | None, deadline: float, stop: threading.Event
) -> ToolOutput:
    report = WalkReport()
    base_rel, files = _files(sb, path, include, deadline, stop, report)
    matches: list[str] = []
    files_searched = skipped_large = skipped_binary = 0
    truncated = timed_out = False
    for rel, real, is_dir in files:
        if is_dir:
            continue
        if stop.is_set() or time.monotonic() > deadline:
            timed_out = True
            break
        try:
            if real.stat().st_size > MAX_GREP_FILE_BYTES:
                skipped_large += 1
                continue
            with reader(real) as f:
                blob = f.read(MAX_GREP_FILE_BYTES + 1)
        except (OSError, ToolError):
            continue
        if len(blob) > MAX_GREP_FILE_BYTES:
            skipped_large += 1
            continue
        if is_binary(blob[:SNIFF_BYTES]):
            skipped_binary += 1
            continue
        files_searched += 1
        for lineno, line in enumerate(blob.decode("utf-8", errors="replace").split("\n"), start=1):
            if lineno % 1000 == 0 and (stop.is_set() or time.monotonic() > deadline):
                timed_out = True
                break
            m = rx.search(line, 0, MAX_GREP_SEARCH_CHARS)
            if m is None:
                continue
            if len(matches) >= MAX_GREP_MATCHES:
                truncated = True
                break
            matches.append(f"{rel}:{lineno}: {_clip_line(line.rstrip(chr(13)), m.start())}")
        if truncated or timed_out:
            break
    timed_out = timed_out or report.timed_out
    lines = list(matches) if matches else [f"no matches for {rx.pattern!r} in {base_rel!r}"]
    if truncated:
        lines.append(f"[truncated: first {MAX_GREP_MATCHES} matches shown; use a narrower pattern or path]")
    if timed_out:
        lines.append("[partial: the search time budget ran out; results may be incomplete — narrow the path]")
    if skipped_large or skipped_binary:
        lines.append(
            f"[skipped {skipped_large} file(s) over {MAX_GREP_FILE_BYTES // (1024 * 1024)} MB "
            f"and {skipped_binary} binary file(s)]"
        )
    return ToolOutput(
        ok=True,
        text="\n".join(lines),
        data={
            "pattern": rx.pattern,
            "path": base_rel,
            "matches": matches,
            "files_searched": files_searched,
            "skipped_large": skipped_large,
            "skipped_binary": skipped_binary,
            "truncated": truncated,
            "partial": timed_out,
        },
    )


def _clip_line(line: str, at: int) -> str:
    if len(line) <= MAX_GREP_LINE_CHARS:
        return line
    start = max(0, at - 100)
    end = start + MAX_GREP_LINE_CHARS
    return ("…" if start else "") + line[start:end] + ("…" if end < len(line) else "")


class GrepArgs(ToolArgs):
    pattern: str = Field(description="Python `re` regular expression searched in each line.")
    path: str = Field(".", description=f"File or directory to search (default '.', the whole workspace). {PATH_NOTE}")
    include: str | None = Field(
        None, description="Only search files whose name matches this glob, e.g. '*.py' or '*.{ts,tsx}'."
    )


async def _run(ctx: ToolContext, args: GrepArgs) -> ToolOutput:
    return await grep(ctx.sandbox, args.pattern, args.path, args.include)


GREP = Tool(
    name="grep",
    description="Search file contents with a Python regular expression (use '(?i)' for case-insensitive). Returns "
    f"'file:line: text' lines, at most {MAX_GREP_MATCHES}; binary files and files over "
    f"{MAX_GREP_FILE_BYTES // (1024 * 1024)} MB are skipped.",
    args=GrepArgs,
    handler=_run,
    read_only=True,
)
