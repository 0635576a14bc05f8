"""SLA marks: warning at the threshold, violation after the deadline, once each; met or late at completion."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from polpo.clock import FakeClock
from polpo.sla.deadlines import Mark, completion_mark, percent_used, resolve_deadline, sla_status

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DEADLINE = START + timedelta(seconds=100)
DL = "2026-03-01T12:01:40.000Z"


def status(at_s: float, already: frozenset[str] = frozenset(), threshold: float = 0.8) -> list[Mark]:
    return sla_status(START + timedelta(seconds=at_s), START, DEADLINE, threshold, already,
                      entity_id="m:1", entity_type="task")


@pytest.mark.parametrize(
    ("at_s", "already", "expected"),
    [
        pytest.param(0, frozenset(), [], id="at start"),
        pytest.param(79, frozenset(), [], id="79 %"),
        pytest.param(80, frozenset(), [Mark("warning", {
            "entityId": "m:1", "entityType": "task", "deadline": DL, "elapsed": 80_000, "remaining": 20_000,
            "percentUsed": 0.8})], id="80 %"),
        pytest.param(80, frozenset({"warning"}), [], id="80 %, warned already"),
        pytest.param(100, frozenset(), [Mark("warning", {
            "entityId": "m:1", "entityType": "task", "deadline": DL, "elapsed": 100_000, "remaining": 0,
            "percentUsed": 1.0})], id="exactly at the deadline is not late"),
        pytest.param(100.5, frozenset({"warning"}), [Mark("violated", {
            "entityId": "m:1", "entityType": "task", "deadline": DL, "overdueMs": 500})], id="past the deadline"),
        pytest.param(130, frozenset(), [Mark("violated", {
            "entityId": "m:1", "entityType": "task", "deadline": DL, "overdueMs": 30_000})],
            id="already past at first check: violated only"),
        pytest.param(130, frozenset({"warning", "violated"}), [], id="violated once"),
        pytest.param(130, frozenset({"met"}), [], id="nothing after met"),
        pytest.param(90, frozenset({"violated"}), [], id="nothing after violated"),
    ],
)
def test_sla_status(at_s: float, already: frozenset[str], expected: list[Mark]) -> None:
    assert status(at_s, already) == expected


def test_warning_then_violation_with_a_fake_clock() -> None:
    clock = FakeClock(START)
    recorded: set[str] = set()
    seen: list[str] = []
    for _ in range(30):  # checks every 5 s for 150 s
        for mark in sla_status(clock.now(), START, DEADLINE, 0.8, recorded, entity_id="m", entity_type="mission"):
            recorded.add(mark.kind)
            seen.append(f"{mark.event}@{(clock.now() - START).total_seconds():g}")
        clock.advance(5)
    assert seen == ["sla:warning@80", "sla:violated@105"]


def test_threshold_is_configurable() -> None:
    assert status(49) == [] and status(49, threshold=0.5) == []
    assert [m.kind for m in status(50, threshold=0.5)] == ["warning"]
    assert [m.kind for m in status(1, threshold=0.01)] == ["warning"]


def test_empty_window_counts_as_fully_used() -> None:
    assert percent_used(START, START, START) == 1.0
    marks = sla_status(START, START, START, 0.8, frozenset(), entity_id="t", entity_type="task")
    assert [m.kind for m in marks] == ["warning"]
    assert percent_used(START - timedelta(seconds=5), START, DEADLINE) == 0.0  # clock before start


@pytest.mark.parametrize(
    ("finished_s", "already", "expected"),
    [
        pytest.param(60, frozenset(), Mark("met", {"entityId": "m:1", "entityType": "task", "deadline": DL,
                                                   "marginMs": 40_000}), id="early"),
        pytest.param(100, frozenset({"warning"}), Mark("met", {"entityId": "m:1", "entityType": "task",
                                                               "deadline": DL, "marginMs": 0}), id="on time"),
        pytest.param(101, frozenset(), Mark("violated", {"entityId": "m:1", "entityType": "task",
                                                         "deadline": DL, "overdueMs": 1000}),
                     id="late, not caught by the monitor"),
        pytest.param(101, frozenset({"violated"}), None, id="late, already recorded"),
        pytest.param(60, frozenset({"met"}), None, id="met recorded already"),
    ],
)
def test_completion_mark(finished_s: float, already: frozenset[str], expected: Mark | None) -> None:
    got = completion_mark(START + timedelta(seconds=finished_s), DEADLINE, entity_id="m:1", entity_type="task",
                          already=already)
    assert got == expected


@pytest.mark.parametrize(
    ("deadline", "expected"),
    [
        ("PT2H", START + timedelta(hours=2)),
        ("P1DT30M", START + timedelta(days=1, minutes=30)),
        (timedelta(seconds=90), START + timedelta(seconds=90)),
        ("2026-03-02T09:00:00Z", datetime(2026, 3, 2, 9, tzinfo=UTC)),
        ("2026-03-02T10:00:00+01:00", datetime(2026, 3, 2, 9, tzinfo=UTC)),
        (datetime(2026, 3, 5, tzinfo=UTC), datetime(2026, 3, 5, tzinfo=UTC)),
    ],
)
def test_resolve_deadline(deadline: str | timedelta | datetime, expected: datetime) -> None:
    assert resolve_deadline(deadline, START) == expected


@pytest.mark.parametrize("bad", ["tomorrow", "2026-03-02T09:00:00", "PT"])
def test_resolve_deadline_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        resolve_deadline(bad, START)


def test_resolve_deadline_rejects_naive_values() -> None:
    with pytest.raises(ValueError, match="timezone"):
        resolve_deadline(datetime(2026, 3, 5), START)
    with pytest.raises(ValueError, match="aware"):
        resolve_deadline("PT1H", datetime(2026, 3, 5))
