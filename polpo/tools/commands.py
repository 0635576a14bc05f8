"""The ``run_command`` tool of LLM agents: one ``bash -c`` command in the workspace, bounded in time and output.

The command goes through :func:`polpo.tools.procs.run_process`, so it leads its own process group and the whole
group is killed on timeout, on cancellation, and after the leader exits (nothing it starts outlives the call).
Its environment is :func:`~polpo.tools.procs.minimal_env` with secret-looking names scrubbed — never the daemon's
API keys — plus the attempt's marker variable, so orphans can still be found after a daemon crash. stdin is
``/dev/null``: an interactive program gets end-of-file instead of hanging until the timeout.

Like every tool it never raises for a bad request: the problem comes back as ``ToolOutput(ok=False,
text="Error: …")``, its arguments bound by :mod:`polpo.tools.registry` from :class:`RunCommandArgs`. A command
that runs and exits non-zero is *not* a tool failure (``ok=True``, the exit code is in the text): the model needs
its output to decide what to do next. The timeout the model asks for is capped by the session's
:attr:`~polpo.tools.registry.ToolContext.command_timeout`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from polpo.clock import Clock
from polpo.llm.secrets import scrubbed_env
from polpo.tools.output import ToolOutput, fail
from polpo.tools.procs import ProcResult, minimal_env, run_process
from polpo.tools.registry import Number, Tool, ToolArgs, ToolContext

__all__ = [
    "DEFAULT_COMMAND_TIMEOUT",
    "MAX_COMMAND_CHARS",
    "RUN_COMMAND",
    "SHOWN_STDERR_CHARS",
    "SHOWN_STDOUT_CHARS",
    "RunCommandArgs",
    "command_env",
    "run_command",
]

DEFAULT_COMMAND_TIMEOUT = 60.0
"""Seconds a command may run when the model does not say (still capped by the agent's own limit)."""
MAX_COMMAND_CHARS = 20_000
SHOWN_STDOUT_CHARS = 10_000
SHOWN_STDERR_CHARS = 5_000
_OUTPUT_LIMIT = 64 * 1024  # bytes kept per stream by run_process (tails); the model sees less, see above
_GRACE = 3.0  # SIGTERM → SIGKILL delay on timeout


def command_env(env_marker: tuple[str, str] | None = None) -> dict[str, str]:
    """What a command sees: the minimal secret-free environment plus the attempt's orphan marker."""
    env = scrubbed_env(minimal_env())
    if env_marker is not None:
        key, value = env_marker
        env[key] = value
    return env


def _tail(text: str, limit: int, total_bytes: int) -> str:
    """The end of a stream, saying how much came before it."""
    shown = text[-limit:] if len(text) > limit else text
    hidden = total_bytes - len(shown.encode("utf-8", errors="replace"))
    return f"[… {hidden} earlier bytes not shown]\n{shown}" if hidden > 0 else shown


def _describe(proc: ProcResult, timeout: float) -> ToolOutput:
    data: dict[str, Any] = {
        "exit_code": proc.exit_code,
        "signal": proc.signal,
        "timed_out": proc.timed_out,
        "duration": round(proc.duration, 3),
        "stdout_bytes": proc.stdout_bytes,
        "stderr_bytes": proc.stderr_bytes,
    }
    if proc.timed_out:
        head = f"the command timed out after {timeout:g} s; it and everything it started were killed"
    elif proc.signal is not None:
        head = f"killed by signal {proc.signal}"
    else:
        head = f"exit code {proc.exit_code}"
    parts = [head]
    if proc.stdout_bytes:
        parts.append("stdout:\n" + _tail(proc.stdout_tail, SHOWN_STDOUT_CHARS, proc.stdout_bytes))
    if proc.stderr_bytes:
        parts.append("stderr:\n" + _tail(proc.stderr_tail, SHOWN_STDERR_CHARS, proc.stderr_bytes))
    if not proc.stdout_bytes and not proc.stderr_bytes:
        parts.append("(no output)")
    if proc.timed_out:
        return fail("\n".join(parts), "timeout", **data)
    return ToolOutput(ok=True, text="\n".join(parts), data=data)


async def run_command(
    workspace: Path,
    command: str,
    *,
    timeout: float,  # noqa: ASYNC109 - expiry kills the group and comes back as the tool's result
    clock: Clock,
    env_marker: tuple[str, str] | None = None,
) -> ToolOutput:
    """Run ``bash -c command`` in ``workspace`` for at most ``timeout`` seconds."""
    proc = await run_process(
        ["bash", "-c", command],
        cwd=workspace,
        env=command_env(env_marker),
        clock=clock,
        timeout=timeout,
        grace=_GRACE,
        output_limit=_OUTPUT_LIMIT,
    )
    if proc.error is not None:
        return fail(f"the command could not be started: {proc.error}", "spawn")
    return _describe(proc, timeout)


class RunCommandArgs(ToolArgs):
    command: str = Field(description="The bash command line to run.")
    timeout: Number = Field(
        DEFAULT_COMMAND_TIMEOUT,
        gt=0,
        allow_inf_nan=False,
        description=f"Seconds before the command is killed (default {DEFAULT_COMMAND_TIMEOUT:.0f}; "
        "capped by the agent's limit).",
    )

    @field_validator("command")
    @classmethod
    def _usable(cls, command: str) -> str:
        if not command.strip():
            raise ValueError("must be a non-empty string")
        if len(command) > MAX_COMMAND_CHARS:
            raise ValueError(
                f"is {len(command)} characters long; at most {MAX_COMMAND_CHARS} are accepted "
                "(write a script file with write_file and run it instead)"
            )
        return command


async def _run(ctx: ToolContext, args: RunCommandArgs) -> ToolOutput:
    return await run_command(
        ctx.workspace,
        args.command,
        timeout=min(args.timeout, ctx.command_timeout),
        clock=ctx.clock,
        env_marker=ctx.env_marker,
    )


RUN_COMMAND = Tool(
    name="run_command",
    description=(
        "Run a shell command with `bash -c` in the workspace root (e.g. run the tests, a build, a script). "
        "No interactive input (stdin is empty); no API keys in the environment. Returns the exit code and the "
        f"end of stdout (last {SHOWN_STDOUT_CHARS} characters) and stderr (last {SHOWN_STDERR_CHARS}). "
        "The command and everything it started are killed at the timeout or when it exits."
    ),
    args=RunCommandArgs,
    handler=_run,
    read_only=False,
)
