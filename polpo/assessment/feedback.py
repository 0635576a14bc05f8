"""What went wrong in an attempt, told to the next one. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from polpo.checks.base import CheckOutcome

__all__ = ["failure_reason", "feedback_text", "first_line"]

REASON_CHARS = 300


def feedback_text(*, checks: Sequence[CheckOutcome], exit_code: int | None, timed_out: bool,
                  error: str | None, stderr_tail: str, stdout_tail: str = "") -> str:
    """What went wrong, for the next attempt: the agent's own failure first, then each failed check.

    ``stdout_tail``: given when a command agent exited 0 without changing a file — some CLIs (aider) report a
    failed model call only on stdout and still exit 0; what they printed is then the reason.
    """
    lines: list[str] = []
    if error:
        lines.append(f"The agent could not run: {error}")
    elif timed_out:
        lines.append("The agent was stopped because it ran past its time limit.")
    elif exit_code not in (0, None):
        lines.append(f"The agent exited with code {exit_code}.")
    if (error or timed_out or exit_code not in (0, None)) and stderr_tail.strip():
        lines.append("Its stderr ended with:\n" + _indent(stderr_tail.strip()[-2000:]))
    elif exit_code == 0 and stdout_tail.strip():
        lines.append("The agent exited 0 but changed no file; its output ended with:\n"
                     + _indent(stdout_tail.strip()[-2000:]))
    failed = [c for c in checks if not c.passed]
    if failed:
        lines.append("Failed checks:")
        for c in failed:
            lines.append(f"- {c.type}: {c.message}")
            if c.details:
                lines.append(_indent(c.details.strip()[-2000:], "    "))
    return "\n".join(lines) if lines else "The previous attempt did not pass its checks."


def failure_reason(checks: Sequence[CheckOutcome], exit_code: int | None, timed_out: bool, error: str | None) -> str:
    """Why an attempt failed, in one line for the task's reason: the first failed check by name (what a person
    looks at first), then the agent's own failure; never what the agent printed."""
    agent = (f"the agent could not run: {error}" if error else "the agent ran past its time limit" if timed_out
             else f"the agent exited with code {exit_code}" if exit_code not in (0, None) else None)
    failed = [c for c in checks if not c.passed]
    if not failed:
        return (agent or "the attempt did not pass its checks")[:REASON_CHARS]
    c = failed[0]
    more = f" (and {len(failed) - 1} more failed check(s))" if len(failed) > 1 else ""
    said = first_line(c.message) if c.message else "failed"
    return (f"check {c.type} {c.label} failed: {said}{more}" + (f"; {agent}" if agent else ""))[:REASON_CHARS]


def first_line(text: str) -> str:
    """The first line of feedback that says something (not a heading), for a transition's reason."""
    for line in text.splitlines():
        if line.strip() and not line.strip().endswith(":"):
            return line.strip()[:300]
    return text.strip()[:300]


def _indent(text: str, prefix: str = "  ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())
