"""Quality-gate verdicts. Pure: task states and scores in, a verdict out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class GateVerdict:
    status: Literal["waiting", "passed", "failed"]
    reason: str
    avg_score: float | None = None


def evaluate_gate(*, after_tasks: Sequence[str], states: Mapping[str, str],
                  scores: Mapping[str, float | None], min_score: float | None,
                  require_all_passed: bool) -> GateVerdict:
    """Evaluate once every ``after_tasks`` entry is terminal (done or failed).

    ``min_score`` compares the mean score of the after-tasks that have one (failed tasks with a score count);
    when none of them has a score the gate fails and says why, rather than comparing against nothing.
    """
    waiting = [t for t in after_tasks if states.get(t) not in ("done", "failed")]
    if waiting:
        return GateVerdict("waiting", "waiting for: " + ", ".join(waiting))
    failed = [t for t in after_tasks if states.get(t) == "failed"]
    if require_all_passed and failed:
        return GateVerdict("failed", "required tasks failed: " + ", ".join(failed))
    if min_score is not None:
        have = [s for t in after_tasks if (s := scores.get(t)) is not None]
        if not have:
            return GateVerdict(
                "failed", f"no task in afterTasks has a score (minScore {min_score} needs llm_review checks)")
        avg = sum(have) / len(have)
        if avg < min_score:
            return GateVerdict("failed", f"average score {avg:.2f} below minScore {min_score}", avg)
        return GateVerdict("passed", f"average score {avg:.2f} ≥ minScore {min_score}", avg)
    return GateVerdict("passed", "all afterTasks finished")
