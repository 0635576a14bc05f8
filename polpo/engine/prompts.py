"""The instructions an agent receives for each attempt, and the feedback of a failed one. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def describe_expectation(exp: Mapping[str, Any]) -> str:
    kind = exp.get("type")
    if kind == "file_exists":
        paths = exp.get("paths") or [exp.get("path")]
        return "file_exists: " + ", ".join(str(p) for p in paths)
    if kind in ("test", "script"):
        extra = f" (expected exit code {exp['expectExitCode']})" if exp.get("expectExitCode") else ""
        return f"{kind}: `{exp.get('command')}`{extra}"
    if kind == "llm_review":
        return f"llm_review: {exp.get('criteria') or exp.get('prompt') or 'reviewed by LLM judges'}"
    return str(kind)


def feedback_text(*, checks: Sequence[Mapping[str, Any]], exit_code: int | None, timed_out: bool,
                  error: str | None, stderr_tail: str) -> str:
    """What went wrong, for the next attempt: the agent's own failure first, then each failed check."""
    lines: list[str] = []
    if error:
        lines.append(f"The agent could not run: {error}")
    elif timed_out:
        lines.append("The agent was stopped because it ran past its time limit.")
    elif exit_code not in (0, None):
        lines.append(f"The agent exited with code {exit_code}.")
    if (error or timed_out or exit_code not in (0, None)) and stderr_tail.strip():
        lines.append("Its stderr ended with:\n" + _indent(stderr_tail.strip()[-2000:]))
    failed = [c for c in checks if not c.get("passed")]
    if failed:
        lines.append("Failed checks:")
        for c in failed:
            lines.append(f"- {c.get('type')}: {c.get('message')}")
            if c.get("details"):
                lines.append(_indent(str(c["details"]).strip()[-2000:], "    "))
    return "\n".join(lines) if lines else "The previous attempt did not pass its checks."


def build_prompt(*, title: str, description: str, mission_name: str, mission_description: str | None,
                 expectations: Sequence[Mapping[str, Any]], kind: str, feedback: str | None,
                 attempt_label: str = "") -> str:
    parts: list[str] = []
    if kind == "fix":
        parts.append(
            f"TARGETED FIX{attempt_label}: your previous run finished but did not pass its checks. "
            "Your earlier work is still in the workspace: do not start over, fix only what is listed below."
        )
        parts.append(feedback or "")
        parts.append("Original task:")
    elif kind == "retry":
        parts.append(
            f"RETRY{attempt_label}: the previous attempt failed. Do the task again from the start, "
            "avoiding what went wrong last time:"
        )
        parts.append(feedback or "")
        parts.append("Original task:")
    parts.append(f"# {title}\n\n{description}")
    context = f"Mission: {mission_name}"
    if mission_description:
        context += f" — {mission_description}"
    parts.append(context)
    if expectations:
        parts.append("Your work will be checked by:\n" + "\n".join(
            f"- {describe_expectation(e)}" for e in expectations))
    return "\n\n".join(p for p in parts if p)


def _indent(text: str, prefix: str = "  ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())
