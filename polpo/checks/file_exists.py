"""``file_exists``: the files the task was to produce are there, inside the workspace.

Paths are relative to the mission's workspace. An absolute path or one with ``..`` is refused when the mission
is validated, and a path that leads out of the workspace through a symlink counts as missing (with the reason),
so a check can never be satisfied by a file elsewhere on the machine.

A few paths are looked up on the event loop: each costs about 15 µs, while a worker thread's round trip
costs about half a millisecond on a busy machine (it waits for the GIL and a core), a fifth of a chained task's
step. A long list goes to a thread, so that no check holds the loop for long.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import anyio

from polpo.checks.base import CheckContext, CheckOutcome, CheckType, Correction
from polpo.checks.expectations import FileExistsExpectation, relative_path_problem
from polpo.checks.labels import truncate
from polpo.clock import Clock
from polpo.tools.sandbox import Sandbox, SandboxError

__all__ = ["INLINE_PATHS", "FileExists", "FileExistsExpectation", "relative_path_problem", "run_file_exists"]

INLINE_PATHS = 8  # up to this many paths are looked up on the loop (about 15 µs each); more, in a worker thread


async def run_file_exists(paths: Sequence[str], *, workspace: Path, clock: Clock) -> CheckOutcome:
    """Pass iff every path exists inside ``workspace`` (symlinks leading out count as missing)."""
    start = clock.monotonic()
    label = truncate(", ".join(paths))
    if not paths:
        return CheckOutcome("file_exists", label, False, "No file paths to check")
    wanted = list(paths)
    missing = (_missing(wanted, workspace) if len(wanted) <= INLINE_PATHS
               else await anyio.to_thread.run_sync(_missing, wanted, workspace))
    duration = round(max(0.0, clock.monotonic() - start), 4)
    n = len(paths)
    if not missing:
        return CheckOutcome("file_exists", label, True, f"All {n} file(s) exist", None, duration)
    listed = ", ".join(p for p, _ in missing[:20]) + (f" and {len(missing) - 20} more" if len(missing) > 20 else "")
    details = "\n".join(p if why is None else f"{p} ({why})" for p, why in missing[:200])
    return CheckOutcome("file_exists", label, False, f"Missing {len(missing)}/{n} file(s): {listed}", details, duration)


def _missing(paths: list[str], workspace: Path) -> list[tuple[str, str | None]]:
    sandbox = Sandbox(workspace)
    out: list[tuple[str, str | None]] = []
    for raw in paths:
        if not raw.strip():
            out.append((raw, "empty path"))
            continue
        try:
            sandbox.resolve(raw, must_exist=True)
        except SandboxError as e:
            why = None if "does not exist" in str(e) else str(e)
            out.append((raw, why))
    return out


class FileExists(CheckType):
    type = "file_exists"
    rank = 0
    model = FileExistsExpectation
    correctable = ("path", "paths")

    def label(self, exp: FileExistsExpectation) -> str:
        return truncate(", ".join(exp.all_paths))

    def describe(self, exp: Mapping[str, Any]) -> str:
        paths = exp.get("paths") or [exp.get("path")]
        return "file_exists: " + ", ".join(str(p) for p in paths)

    async def run(self, exp: FileExistsExpectation, ctx: CheckContext) -> CheckOutcome:
        return await run_file_exists(exp.all_paths, workspace=ctx.workspace, clock=ctx.clock)

    def correct(self, exp: Mapping[str, Any], field_name: str, value: Any, *, floor: float,
                known_files: Collection[str] | None) -> Correction | str:
        values = [value] if field_name == "path" else value
        if not isinstance(values, list) or not values or len(values) > 50:
            return f"{field_name} must be a non-empty path or list of at most 50 paths"
        if not all(isinstance(v, str) and v.strip() and relative_path_problem(v) is None for v in values):
            return "paths must be relative to the workspace, without '..'"
        paths: list[str] = [v.strip() for v in values]
        if known_files is not None:
            known = {str(PurePosixPath(f)) for f in known_files}
            unknown = [p for p in paths if str(PurePosixPath(p)) not in known]
            if unknown:
                return f"{', '.join(unknown)} is not among the files the attempt created or changed"
        old = exp.get("path") if exp.get("path") is not None else exp.get("paths")
        if paths == ([old] if isinstance(old, str) else list(old or [])):
            return "the new paths are the same as the old ones"
        new = {k: v for k, v in exp.items() if k not in ("path", "paths")}
        new[field_name] = paths[0] if field_name == "path" else paths
        return Correction(new, old, new[field_name])
