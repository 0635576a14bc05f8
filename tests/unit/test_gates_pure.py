"""Gate verdicts over every combination of afterTask states."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from polpo.engine.gates import GateDecision, evaluate_gate


@dataclass(frozen=True)
class Gate:
    after_tasks: list[str]
    min_score: float | None = None
    require_all_passed: bool = False


def decide(after_tasks: list[str], states: dict[str, str], scores: dict[str, float | None],
           min_score: float | None, require_all_passed: bool) -> GateDecision:
    after = {t: (states[t], scores.get(t)) for t in states}
    return evaluate_gate(Gate(after_tasks, min_score, require_all_passed), after)

STATES = ("pending", "in_progress", "done", "failed")


@pytest.mark.parametrize(("a", "b"), list(itertools.product(STATES, STATES)))
@pytest.mark.parametrize("require_all", [False, True])
def test_every_state_combination(a: str, b: str, require_all: bool) -> None:
    v = decide(
        after_tasks=["A", "B"],
        states={"A": a, "B": b},
        scores={},
        min_score=None,
        require_all_passed=require_all,
    )
    if a not in ("done", "failed") or b not in ("done", "failed"):
        assert v.status == "waiting"
    elif require_all and "failed" in (a, b):
        assert v.status == "failed" and "required tasks failed" in v.reason
    else:
        assert v.status == "passed"


def test_min_score_uses_mean_of_scored_tasks() -> None:
    v = decide(
        after_tasks=["A", "B", "C"],
        states=dict.fromkeys("ABC", "done"),
        scores={"A": 3.0, "B": 4.0, "C": None},
        min_score=3.5,
        require_all_passed=False,
    )
    assert v.status == "passed" and v.avg_score == 3.5
    v = decide(
        after_tasks=["A", "B"],
        states=dict.fromkeys("AB", "done"),
        scores={"A": 3.0, "B": 3.5},
        min_score=4.0,
        require_all_passed=False,
    )
    assert v.status == "failed" and v.avg_score == pytest.approx(3.25) and "below minScore" in v.reason


def test_min_score_without_any_score_fails_and_says_why() -> None:
    v = decide(
        after_tasks=["A"], states={"A": "done"}, scores={}, min_score=3.0, require_all_passed=False
    )
    assert v.status == "failed" and "no task in afterTasks has a score" in v.reason
