"""When a task's transition ends its attempt, for the metrics and the spans (``polpo.telemetry.follow``): waiting
for a person's review ends nothing — the attempt's verdict is the one the person's answer leads to."""

from __future__ import annotations

import pytest

from polpo.telemetry.follow import Follow, attempt_end


@pytest.mark.parametrize(("old", "new", "ended"), [
    ("review", "done", "passed"),
    ("review", "pending", "failed"),  # a fix or a retry
    ("review", "failed", "failed"),
    ("review", "on_hold", "failed"),
    ("review", "awaiting_review", None),  # the judge could not tell: no verdict yet
    ("awaiting_review", "review", None),  # a person answered: the assessment completes next
    ("awaiting_review", "failed", "failed"),  # cancelled (or the SLA) while it waited
    ("in_progress", "pending", "interrupted"),
    ("in_progress", "review", None),
    ("assigned", "in_progress", None),
    ("pending", "assigned", None),
])
def test_attempt_end(old: str, new: str, ended: str | None) -> None:
    assert attempt_end(old, new) == ended


def test_an_attempt_a_person_passed_counts_once_as_passed_from_dispatch_to_their_verdict() -> None:
    f = Follow()
    steps = [("pending", "assigned", "dispatch", 0.0), ("assigned", "in_progress", "spawned", 1.0),
             ("in_progress", "review", "finished", 2.0), ("review", "awaiting_review", "ask_review", 3.0),
             ("awaiting_review", "review", "reviewed", 50.0), ("review", "done", "pass", 51.0)]
    ends = [f.transition("m:1", {"from": a, "to": b, "trigger": t, "attempt": 1, "kind": "initial"}, at)
            for a, b, t, at in steps]
    ended = [e for e, _ in ends if e is not None]
    assert [(e.outcome, e.seconds) for e in ended] == [("passed", 51.0)]
    assert ends[-1][1] == 51.0  # the task's own duration ends with it
