"""Bounded searches of the workspace tree for ``glob`` and ``grep``: a pruned walk and a hard-stopped worker.

The walk is Python (``os.scandir``; no shell, no external program). It skips :data:`~polpo.workspace.SKIP_DIRS`
(``.git``, ``node_modules``…) unless a pattern names them, never follows a symlink out of the workspace nor
descends into a symlinked directory, and stops at its deadline or when told to (the caller then says the result
is partial). The worker thread running a search gets :data:`SEARCH_TIME_BUDGET` seconds; one still busy
:data:`HARD_STOP_GRACE` seconds after that (a stalled file system) is abandoned and the tool answers with an error.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread

from polpo.tools.output import ToolOutput, error_output, fail
from polpo.tools.patterns import PathPattern
from polpo.tools.sandbox import Sandbox
from polpo.workspace import SKIP_DIRS

__all__ = ["HARD_STOP_GRACE", "SEARCH_TIME_BUDGET", "WalkReport", "bounded_search", "walk"]

SEARCH_TIME_BUDGET = 5.0
HARD_STOP_GRACE = 2.0


async def bounded_search(tool: str, fn: Callable[[threading.Event], ToolOutput], budget: float) -> ToolOutput:
    """Run a search worker with a hard stop: if it outlives ``budget + HARD_STOP_GRACE`` it is abandoned."""
    stop = threading.Event()
    result: ToolOutput | None = None
    try:
        with anyio.move_on_after(max(budget, 0.0) + HARD_STOP_GRACE):
            result = await anyio.to_thread.run_sync(fn, stop, abandon_on_cancel=True)
    except Exception as exc:
        return error_output(tool, exc)
    finally:
        stop.set()
    if result is None:
        return fail(
            f"{tool} did not finish within {budget + HARD_STOP_GRACE:.0f} s and was abandoned; narrow the search",
            "timeout",
        )
    return result


@dataclass(slots=True)
class WalkReport:
    """Outcome flags of a bounded walk."""

    timed_out: bool = False
    entries_seen: int = 0


def walk(
    sb: Sandbox,
    base: Path,
    patterns: list[PathPattern],
    deadline: float,
    stop: threading.Event,
    report: WalkReport,
) -> Iterator[tuple[str, Path, bool]]:
    """Yield ``(relative path, real path, is_dir)`` for entries under ``base`` matched by any pattern.

    Symlinks leading outside the workspace are skipped without being opened; symlinked directories inside it are
    reported but not descended into (no loops); :data:`SKIP_DIRS` are skipped unless a pattern names them.
    """
    base_rel = sb.relative(base)
    prefix = "" if base_rel == "." else base_rel + "/"
    literal_names = frozenset(name for p in patterns for name in p.literals)
    starts = [p.start() for p in patterns]
    stack: list[tuple[Path, str, list[frozenset[int]]]] = [(base, prefix, starts)]
    while stack:
        if stop.is_set() or time.monotonic() > deadline:
            report.timed_out = True
            return
        dir_path, rel_prefix, states = stack.pop()
        try:
            with os.scandir(dir_path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        subdirs: list[tuple[Path, str, list[frozenset[int]]]] = []
        for entry in entries:
            report.entries_seen += 1
            if report.entries_seen % 256 == 0 and (stop.is_set() or time.monotonic() > deadline):
                report.timed_out = True
                return
            new_states = [p.step(s, entry.name) if s else s for p, s in zip(patterns, states, strict=True)]
            if not any(new_states):
                continue
            rel = rel_prefix + entry.name
            try:
                if entry.is_symlink():
                    target = os.path.realpath(entry.path)
                    if not sb.contains(target):
                        continue  # never touch what lies outside
                    is_dir = os.path.isdir(target)
                    descend = False
                    real = Path(target)
                else:
                    is_dir = entry.is_dir(follow_symlinks=False)
                    descend = is_dir
                    real = Path(entry.path)
            except OSError:
                continue
            if is_dir and entry.name in SKIP_DIRS and entry.name not in literal_names:
                continue
            if any(p.accepts(s) for p, s in zip(patterns, new_states, strict=True)):
                yield rel, real, is_dir
            if descend and any(p.can_continue(s) for p, s in zip(patterns, new_states, strict=True)):
                subdirs.append((real, rel + "/", new_states))
        stack.extend(reversed(subdirs))
