"""Mission quality threshold: priority-weighted average over done, scored tasks."""

from __future__ import annotations

import pytest

from polpo.engine.threshold import ScoredTask, mission_threshold

T = ScoredTask


@pytest.mark.parametrize(
    ("tasks", "threshold", "avg", "passed", "fragment"),
    [
        pytest.param([T("a", "done", 2.0)], None, 2.0, None, "no quality threshold set", id="no threshold"),
        pytest.param([T("a", "done", 4.0), T("b", "done", 3.5)], 3.0, 3.75, True, "≥ quality threshold 3",
                     id="above"),
        pytest.param([T("a", "done", 3.0), T("b", "done", 3.5)], 4.0, 3.25, False, "below quality threshold 4",
                     id="below"),
        pytest.param([T("a", "done", 4.0, 3.0), T("b", "done", 2.0, 1.0)], 3.5, 3.5, True, "priority-weighted",
                     id="weighted, equal is a pass"),
        pytest.param([T("a", "done", 4.0, 2.0), T("b", "done", 2.0, 0.5)], 3.7, 3.6, False, "below",
                     id="spec example priorities 2.0 and 0.5"),
        pytest.param([T("a", "done", None)], 4.0, None, None, "no done task has a score", id="nothing scored"),
        pytest.param([], 4.0, None, None, "not checked", id="no tasks"),
        pytest.param([T("a", "done", 4.0), T("b", "failed", 1.0), T("c", "pending", 1.0)], 4.0, 4.0, True,
                     "1 scored done task", id="failed and open tasks never count"),
        pytest.param([T("a", "done", 5.0, None), T("b", "done", 2.0, 0.0)], 3.5, 3.5, True, "≥",
                     id="missing or non-positive priority counts as 1"),
        pytest.param([T("a", "done", 3.0), T("b", "done", None, 10.0)], 3.0, 3.0, True, "1 scored",
                     id="unscored done task carries no weight"),
    ],
)
def test_threshold(tasks: list[ScoredTask], threshold: float | None, avg: float | None, passed: bool | None,
                   fragment: str) -> None:
    r = mission_threshold(tasks, threshold)
    assert r.avg_score == (pytest.approx(avg) if avg is not None else None)
    assert r.passed is passed
    assert fragment in r.explanation
    assert r.threshold == threshold or r.passed is None


def test_plain_tuples_are_accepted() -> None:
    r = mission_threshold([("a", "done", 4.0, 1.0)], 4.0)
    assert r.passed is True and r.threshold == 4.0
