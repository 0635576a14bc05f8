"""The mission quality threshold. Pure: the tasks' statuses, scores and priorities in, a verdict out.

``avg = Σ(score·priority) / Σpriority`` over the tasks that are ``done`` **and** have a score (the global
score of the assessment that passed them; tasks without an ``llm_review`` have none). ``failed`` tasks never
count: a mission with a failed task has already failed for that reason. The verdict is ``avg >= threshold``
(inclusive, 1e-9 tolerance for float sums).

``passed`` is ``None`` — no verdict, nothing to emit — when no threshold applies, or when no done task has a
score: a project-wide ``[defaults] quality_threshold`` must not fail every mission that has no LLM review.
The explanation says which case it was.

This is deliberately not the report's unweighted mean over every scored task (Polpo reported both under one name): the two numbers
answer different questions and are named differently.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["ScoredTask", "ThresholdResult", "mission_threshold"]

_EPS = 1e-9


class ScoredTask(NamedTuple):
    title: str
    status: str
    score: float | None
    priority: float | None = 1.0  # None or ≤ 0 (which the mission schema rejects) count as 1.0


@dataclass(frozen=True)
class ThresholdResult:
    avg_score: float | None
    passed: bool | None  # None: no threshold, or nothing scored to compare
    explanation: str
    threshold: float | None = None


def mission_threshold(tasks: Iterable[tuple[str, str, float | None, float | None]],
                      threshold: float | None) -> ThresholdResult:
    """The priority-weighted average of the done tasks' scores, compared with ``threshold``.

    ``tasks`` are :class:`ScoredTask` (or plain 4-tuples). Pass ``mission.spec.quality_threshold`` or, when it is None, ``cfg.defaults.quality_threshold``.
    """
    scored = [(t[2], _weight(t[3])) for t in tasks if t[1] == "done" and t[2] is not None]
    if not scored:
        why = "no done task has a score (no llm_review)"
        if threshold is None:
            return ThresholdResult(None, None, f"no quality threshold set; {why}")
        return ThresholdResult(None, None, f"{why}: quality threshold {threshold:g} not checked", threshold)
    total_w = sum(w for _, w in scored)
    avg = sum(s * w for s, w in scored) / total_w
    basis = f"priority-weighted average {avg:.2f} of {len(scored)} scored done task(s)"
    if threshold is None:
        return ThresholdResult(avg, None, f"{basis}; no quality threshold set")
    if avg + _EPS >= threshold:
        return ThresholdResult(avg, True, f"{basis} ≥ quality threshold {threshold:g}", threshold)
    return ThresholdResult(avg, False, f"{basis} below quality threshold {threshold:g}", threshold)


def _weight(priority: float | None) -> float:
    return priority if priority is not None and priority > 0 else 1.0
