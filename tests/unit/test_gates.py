"""Quality-gate decisions: a table of afterTask states × scores × gate settings, then every combination."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from polpo.engine.gates import GateDecision, TaskState, evaluate_gate
from polpo.mission.schema import QualityGate


@dataclass(frozen=True)
class G:
    after_tasks: tuple[str, ...] = ("A", "B")
    min_score: float | None = None
    require_all_passed: bool = False


D, F, P, R = "done", "failed", "pending", "in_progress"

TABLE: list[tuple[str, G, dict[str, TaskState], str, float | None, str]] = [
    # id, gate, states, expected status, expected avg, reason fragment
    ("all done, no criteria", G(), {"A": TaskState(D), "B": TaskState(D)}, "passed", None, "finished"),
    ("one pending", G(), {"A": TaskState(D), "B": TaskState(P)}, "waiting", None, "waiting for: B"),
    ("one running, one failed", G(require_all_passed=True), {"A": TaskState(R), "B": TaskState(F)},
     "waiting", None, "waiting for: A"),
    ("all failed, no criteria: only an ordering point", G(), {"A": TaskState(F), "B": TaskState(F)},
     "passed", None, "2 failed"),
    ("requireAllPassed, one failed", G(require_all_passed=True), {"A": TaskState(D, 5.0), "B": TaskState(F)},
     "failed", None, "required tasks failed: B"),
    ("requireAllPassed, all done", G(require_all_passed=True), {"A": TaskState(D), "B": TaskState(D)},
     "passed", None, "finished"),
    ("minScore below", G(min_score=4.0), {"A": TaskState(D, 3.0), "B": TaskState(D, 3.5)},
     "failed", 3.25, "below minScore 4"),
    ("minScore above", G(min_score=4.0), {"A": TaskState(D, 4.0), "B": TaskState(D, 4.5)},
     "passed", 4.25, "≥ minScore 4"),
    ("minScore equal is a pass", G(min_score=3.5), {"A": TaskState(D, 3.0), "B": TaskState(D, 4.0)},
     "passed", 3.5, "≥ minScore"),
    ("unscored done task does not count", G(min_score=4.0), {"A": TaskState(D, 4.5), "B": TaskState(D)},
     "passed", 4.5, "not counted, no score: B"),
    ("no done task has a score", G(min_score=3.0), {"A": TaskState(D), "B": TaskState(D)},
     "failed", None, "no task in afterTasks has a score (no llm_review check scored A, B)"),
    ("every afterTask failed, minScore", G(min_score=3.0), {"A": TaskState(F, 5.0), "B": TaskState(F)},
     "failed", None, "every afterTask failed"),
    ("failed task's score is excluded", G(min_score=4.0), {"A": TaskState(D, 4.0), "B": TaskState(F, 1.0)},
     "passed", 4.0, "≥ minScore"),
    ("requireAllPassed wins over minScore", G(min_score=1.0, require_all_passed=True),
     {"A": TaskState(D, 5.0), "B": TaskState(F, 5.0)}, "failed", None, "required tasks failed"),
    ("both criteria met", G(min_score=3.0, require_all_passed=True),
     {"A": TaskState(D, 3.0), "B": TaskState(D, 5.0)}, "passed", 4.0, "≥ minScore"),
    ("afterTask unknown to the caller", G(), {"A": TaskState(D)}, "failed", None, "not in the mission: B"),
    ("waiting even though minScore can no longer pass", G(min_score=5.0),
     {"A": TaskState(D, 1.0), "B": TaskState(R)}, "waiting", None, "waiting for: B"),
]


@pytest.mark.parametrize(("gate", "states", "status", "avg", "fragment"),
                         [pytest.param(*row[1:], id=row[0]) for row in TABLE])
def test_table(gate: G, states: dict[str, TaskState], status: str, avg: float | None, fragment: str) -> None:
    d = evaluate_gate(gate, states)
    assert d.status == status
    assert d.avg_score == (pytest.approx(avg) if avg is not None else None)
    assert fragment in d.reason


STATES = ("pending", "assigned", "in_progress", "review", "done", "failed")
SCORES = (None, 2.0, 4.5)


def _oracle(gate: G, states: dict[str, TaskState]) -> tuple[str, float | None]:
    """The documented rules, restated independently of the implementation."""
    if any(s.status not in ("done", "failed") for s in states.values()):
        return "waiting", None
    if gate.require_all_passed and any(s.status == "failed" for s in states.values()):
        return "failed", None
    if gate.min_score is None:
        return "passed", None
    scored = [s.score for s in states.values() if s.status == "done" and s.score is not None]
    if not scored:
        return "failed", None
    avg = sum(scored) / len(scored)
    return ("passed" if avg >= gate.min_score else "failed"), avg


@pytest.mark.parametrize("gate", [G(), G(require_all_passed=True), G(min_score=3.0),
                                  G(min_score=3.0, require_all_passed=True)], ids=repr)
def test_every_combination_of_states_and_scores(gate: G) -> None:
    for (sa, xa), (sb, xb) in itertools.product(itertools.product(STATES, SCORES), repeat=2):
        states = {"A": TaskState(sa, xa), "B": TaskState(sb, xb)}
        d = evaluate_gate(gate, states)
        status, avg = _oracle(gate, states)
        assert (d.status, d.avg_score) == (status, pytest.approx(avg) if avg is not None else None), states


def test_accepts_the_mission_schema_gate_and_plain_tuples() -> None:
    gate = QualityGate.model_validate({"name": "g", "afterTasks": ["A"], "blocksTasks": ["B"], "minScore": 4})
    assert evaluate_gate(gate, {"A": ("done", 4.2)}) == GateDecision(
        "passed", "average score 4.20 ≥ minScore 4", 4.2)


def test_duplicate_after_tasks_count_once() -> None:
    d = evaluate_gate(G(after_tasks=("A", "A", "B"), min_score=3.0),
                      {"A": TaskState(D, 5.0), "B": TaskState(D, 1.0)})
    assert d.avg_score == 3.0 and d.status == "passed"
