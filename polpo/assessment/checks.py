"""Deterministic checks: ``file_exists``, ``test`` and ``script`` expectations.

Unlike Polpo (spec §14 G1/G2), a ``test`` is judged by its exit code like a ``script``, and every command runs
with a timeout, in its own process group, killed whole when the time is up.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio

from polpo.clock import Clock
from polpo.tools.procs import ProcResult, minimal_env, run_process

__all__ = ["CheckResult", "check_label", "run_command_check", "run_file_exists"]

LABEL_MAX = 80
DETAILS_MAX = 2000


@dataclass(frozen=True)
class CheckResult:
    type: str
    label: str
    passed: bool
    message: str
    details: str | None
    duration: float


def _truncate(text: str, limit: int = LABEL_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _command_lines(command: str) -> list[str]:
    return command.strip().splitlines()


def check_label(kind: str, *, command: str | None = None, paths: Sequence[str] | None = None) -> str:
    """Short human label of a check: the command (first line + `` (N lines)`` if multi-line) or the paths."""
    if paths is not None and (kind == "file_exists" or command is None):
        return _truncate(", ".join(paths))
    if command is not None:
        lines = _command_lines(command)
        if not lines:
            return kind
        first = lines[0].strip()
        if len(lines) > 1:
            suffix = f" ({len(lines)} lines)"
            return _truncate(first, LABEL_MAX - len(suffix)) + suffix
        return _truncate(first)
    return kind


async def run_file_exists(paths: Sequence[str], *, workspace: Path, clock: Clock) -> CheckResult:
    """Pass iff every path exists; relative paths resolve against ``workspace``, absolute ones are kept."""
    start = clock.monotonic()
    label = check_label("file_exists", paths=paths)
    if not paths:
        return CheckResult(
            "file_exists", label, False, "No file paths to check", None, clock.monotonic() - start
        )
    missing: list[str] = []
    for raw in paths:
        path = Path(raw)
        target = path if path.is_absolute() else workspace / path
        if not raw.strip() or not await anyio.Path(target).exists():
            missing.append(raw)
    duration = max(0.0, clock.monotonic() - start)
    n = len(paths)
    if not missing:
        return CheckResult("file_exists", label, True, f"All {n} file(s) exist", None, duration)
    listed = ", ".join(missing)
    return CheckResult(
        "file_exists",
        label,
        False,
        f"Missing {len(missing)}/{n} file(s): {listed}",
        "\n".join(missing),
        duration,
    )


def _shell_argv(command: str) -> list[str]:
    bash = shutil.which("bash")
    multi_line = len(_command_lines(command)) > 1
    if bash is not None:
        script = f"set -euo pipefail\n{command}" if multi_line else command
        return [bash, "-c", script]
    script = f"set -eu\n{command}" if multi_line else command
    return ["/bin/sh", "-c", script]


def _tail(text: str, limit: int = DETAILS_MAX) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def _failure_details(proc: ProcResult) -> str | None:
    if proc.error is not None:
        return proc.error
    for text in (proc.stderr_tail, proc.stdout_tail):
        if text.strip():
            return _tail(text.rstrip())
    return None


async def run_command_check(
    kind: Literal["test", "script"],
    command: str,
    *,
    workspace: Path,
    clock: Clock,
    expect_exit_code: int = 0,
    timeout: float = 600.0,  # noqa: ASYNC109 - expiry fails the check and kills the group
    env: Mapping[str, str] | None = None,
    grace: float = 5.0,
) -> CheckResult:
    """Run ``command`` through ``bash -c`` in ``workspace``; pass iff it exits with ``expect_exit_code``.

    ``test`` always expects 0. A multi-line command runs under ``set -euo pipefail``. The environment is ``env``
    if given, else :func:`~polpo.tools.procs.minimal_env` (no API keys), plus ``POLPO_WORKSPACE``.
    """
    start = clock.monotonic()
    label = check_label(kind, command=command)
    noun = "Test" if kind == "test" else "Script"
    expected = 0 if kind == "test" else expect_exit_code
    if not command.strip():
        return CheckResult(
            kind, label, False, f"No {kind} command", None, max(0.0, clock.monotonic() - start)
        )

    child_env = dict(env) if env is not None else minimal_env()
    child_env["POLPO_WORKSPACE"] = os.fspath(workspace)
    proc = await run_process(
        _shell_argv(command), cwd=workspace, env=child_env, clock=clock, timeout=timeout, grace=grace
    )
    duration = max(0.0, clock.monotonic() - start)

    passed = proc.error is None and not proc.timed_out and proc.exit_code == expected
    if passed:
        return CheckResult(kind, label, True, f"{noun} passed: {label}", None, duration)

    if proc.error is not None:
        reason = f"could not start: {proc.error}"
    elif proc.timed_out:
        reason = f"timed out after {timeout:g}s"
    elif proc.signal is not None:
        reason = f"killed by signal {proc.signal}"
    elif kind == "test":
        reason = f"exit {proc.exit_code}"
    else:
        reason = f"exit {proc.exit_code}, expected {expected}"
    return CheckResult(
        kind, label, False, f"{noun} failed: {label} ({reason})", _failure_details(proc), duration
    )
