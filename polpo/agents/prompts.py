"""The instructions an agent receives for each attempt. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from polpo.checks.registry import describe_expectation


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
