"""The instructions an agent receives for each attempt. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from polpo.checks.outcomes import describe_outcome
from polpo.checks.registry import describe_expectation
from polpo.model.questions import Clarification

OUTCOMES_HOW = ("An LLM agent declares each with its register_outcome tool; a command agent writes one JSON line "
                'per outcome ({"type": "file|text|url|json", "label": …, "path" or "value": …}) to the file '
                "named by $POLPO_OUTCOMES. A file outcome whose path exists counts as delivered.")


def outcomes_block(expected: Sequence[Mapping[str, Any]]) -> str:
    """The expected outcomes, as an agent is told them (empty when there are none)."""
    if not expected:
        return ""
    lines = [f"- {describe_outcome(o)}" + (f": {o['description']}" if o.get("description") else "")
             + ("" if o.get("required", True) else " (optional)") for o in expected]
    return "Deliver these outcomes (required ones are checked):\n" + "\n".join(lines) + "\n" + OUTCOMES_HOW


def clarifications_block(clarifications: Sequence[Clarification]) -> str:
    """The task's answered questions, as Polpo appends them to the description (empty when there are none)."""
    return "\n\n".join(f"[Polpo Clarification]\nQ: {c.question}\nA: {c.told}" for c in clarifications)


def build_prompt(*, title: str, description: str, mission_name: str, mission_description: str | None,
                 expectations: Sequence[Mapping[str, Any]], kind: str, feedback: str | None,
                 attempt_label: str = "", expected_outcomes: Sequence[Mapping[str, Any]] = (),
                 clarifications: Sequence[Clarification] = ()) -> str:
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
    parts.append(clarifications_block(clarifications))
    context = f"Mission: {mission_name}"
    if mission_description:
        context += f" — {mission_description}"
    parts.append(context)
    if expectations:
        parts.append("Your work will be checked by:\n" + "\n".join(
            f"- {describe_expectation(e)}" for e in expectations))
    parts.append(outcomes_block(expected_outcomes))
    return "\n\n".join(p for p in parts if p)

