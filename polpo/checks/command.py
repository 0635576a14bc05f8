"""``test`` and ``script``: a command in the workspace, judged by its exit code.

Unlike Polpo, whose ``test`` passed whatever its exit code and whose checks had no timeout, a ``test`` is judged by its exit code like a ``script`` (``exit 3`` fails), and every
command runs with a timeout, in its own process group, killed whole when the time is up. A multi-line command
runs under ``set -euo pipefail``. The environment is minimal (no API keys) plus ``POLPO_WORKSPACE`` and the
attempt's marker, so a check left running by a crashed daemon is found and killed like an agent.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Literal

from polpo.checks.base import CheckContext, CheckOutcome, CheckType, Correction
from polpo.checks.expectations import ScriptExpectation, TestExpectation
from polpo.checks.labels import command_label
from polpo.clock import Clock
from polpo.tools.procs import ProcResult, minimal_env, run_process

__all__ = ["Script", "ScriptExpectation", "Test", "TestExpectation", "failure_details", "failure_reason",
           "run_command_check", "run_shell"]

DETAILS_MAX = 2000
MAX_COMMAND_CHARS = 4_000  # for a judge's correction


def _shell_argv(command: str) -> list[str]:
    bash = shutil.which("bash")
    multi_line = len(command.strip().splitlines()) > 1
    if bash is not None:
        return [bash, "-c", f"set -euo pipefail\n{command}" if multi_line else command]
    return ["/bin/sh", "-c", f"set -eu\n{command}" if multi_line else command]


def _tail(text: str, limit: int = DETAILS_MAX) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def failure_details(proc: ProcResult) -> str | None:
    """What a failed command left to read: why it could not start, else the tail of its stderr or stdout."""
    if proc.error is not None:
        return proc.error
    for text in (proc.stderr_tail, proc.stdout_tail):
        if text.strip():
            return _tail(text.rstrip())
    return None


def failure_reason(proc: ProcResult, timeout: float, expected: int = 0, *, say_expected: bool = False) -> str | None:
    """Why a run did not end with exit code ``expected`` (``could not start: …``, ``timed out after 30s``,
    ``killed by signal 9``, ``exit 3``), or None when it did."""
    if proc.error is not None:
        return f"could not start: {proc.error}"
    if proc.timed_out:
        return f"timed out after {timeout:g}s"
    if proc.signal is not None:
        return f"killed by signal {proc.signal}"
    if proc.exit_code != expected:
        return f"exit {proc.exit_code}" + (f", expected {expected}" if say_expected else "")
    return None


async def run_shell(command: str, *, workspace: Path, clock: Clock, timeout: float,  # noqa: ASYNC109 - kills the group
                    env: Mapping[str, str] | None = None, extra_env: Mapping[str, str] | None = None,
                    grace: float = 5.0) -> ProcResult:
    """Run ``command`` through ``bash -c`` in ``workspace``, in its own process group, killed whole at ``timeout``.

    The environment is ``env`` if given, else the minimal one (no API keys); then ``extra_env`` and
    ``POLPO_WORKSPACE`` are added.
    """
    base = dict(env) if env is not None else minimal_env()
    child_env = {**base, **(extra_env or {}), "POLPO_WORKSPACE": os.fspath(workspace)}
    return await run_process(_shell_argv(command), cwd=workspace, env=child_env, clock=clock, timeout=timeout,
                             grace=grace)


async def run_command_check(kind: Literal["test", "script"], command: str, *, workspace: Path, clock: Clock,
                            expect_exit_code: int = 0, timeout: float = 600.0,  # noqa: ASYNC109 - kills the group
                            env: Mapping[str, str] | None = None, extra_env: Mapping[str, str] | None = None,
                            grace: float = 5.0) -> CheckOutcome:
    """Run ``command`` (:func:`run_shell`); pass iff it exits with ``expect_exit_code``."""
    start = clock.monotonic()
    label = command_label(kind, command)
    noun = "Test" if kind == "test" else "Script"
    expected = 0 if kind == "test" else expect_exit_code
    if not command.strip():
        return CheckOutcome(kind, label, False, f"No {kind} command")
    proc = await run_shell(command, workspace=workspace, clock=clock, timeout=timeout, env=env, extra_env=extra_env,
                           grace=grace)
    duration = round(max(0.0, clock.monotonic() - start), 4)
    reason = failure_reason(proc, timeout, expected, say_expected=kind == "script")
    if reason is None:
        return CheckOutcome(kind, label, True, f"{noun} passed: {label}", None, duration)
    return CheckOutcome(kind, label, False, f"{noun} failed: {label} ({reason})", failure_details(proc), duration)


class _Command(CheckType):
    rank = 1
    correctable = ("command",)

    def label(self, exp: TestExpectation | ScriptExpectation) -> str:
        return command_label(exp.type, exp.command)

    def describe(self, exp: Mapping[str, Any]) -> str:
        extra = f" (expected exit code {exp['expectExitCode']})" if exp.get("expectExitCode") else ""
        return f"{exp.get('type')}: `{exp.get('command')}`{extra}"

    async def run(self, exp: TestExpectation | ScriptExpectation, ctx: CheckContext) -> CheckOutcome:
        timeout = exp.timeout.total_seconds() if exp.timeout is not None else ctx.check_timeout
        code = exp.expect_exit_code if isinstance(exp, ScriptExpectation) else 0
        return await run_command_check(exp.type, exp.command, workspace=ctx.workspace, clock=ctx.clock,
                                       expect_exit_code=code, timeout=timeout, extra_env=ctx.env)

    def correct(self, exp: Mapping[str, Any], field_name: str, value: Any, *, floor: float,
                known_files: Collection[str] | None) -> Correction | str:
        if not isinstance(value, str) or not value.strip():
            return "the new command is empty or not a string"
        if len(value) > MAX_COMMAND_CHARS:
            return "the new command is too long"
        value = value.strip()
        if value == exp.get("command"):
            return "the new command is the same as the old one"
        return Correction({**exp, "command": value}, exp.get("command"), value)


class Test(_Command):
    __test__ = False
    type = "test"
    model = TestExpectation


class Script(_Command):
    type = "script"
    model = ScriptExpectation

