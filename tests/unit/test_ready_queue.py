"""Dispatch order and concurrency limits of the ready queue."""

from __future__ import annotations

from polpo.engine.ready import ReadyQueue


def _drain(q: ReadyQueue, limits: dict[str, list[tuple[str, int | None]]], ready: set[str]) -> list[str]:
    out = []
    while (tid := q.pop_startable(lambda t: t in ready, lambda t: limits[t])) is not None:
        out.append(tid)
        q.started([k for k, _ in limits[tid]])
    return out


def test_priority_then_mission_then_file_order() -> None:
    q = ReadyQueue(global_limit=10)
    q.push(1.0, 1, 0, "m1:1")
    q.push(2.0, 2, 1, "m2:2")
    q.push(1.0, 1, 1, "m1:2")
    q.push(1.0, 2, 0, "m2:1")
    limits = {t: [] for t in ("m1:1", "m1:2", "m2:1", "m2:2")}
    assert _drain(q, limits, set(limits)) == ["m2:2", "m1:1", "m1:2", "m2:1"]


def test_global_limit_stops_dispatch_until_a_slot_frees() -> None:
    q = ReadyQueue(global_limit=2)
    for i in range(4):
        q.push(1.0, 1, i, f"t{i}")
    limits = {f"t{i}": [] for i in range(4)}
    assert _drain(q, limits, set(limits)) == ["t0", "t1"]
    q.finished([])
    assert _drain(q, limits, set(limits)) == ["t2"]


def test_saturated_agent_parks_its_tasks_but_others_still_start() -> None:
    q = ReadyQueue(global_limit=10)
    limits = {"a1": [("agent:a", 1)], "a2": [("agent:a", 1)], "b1": [("agent:b", None)]}
    q.push(3.0, 1, 0, "a1")
    q.push(2.0, 1, 1, "a2")
    q.push(1.0, 1, 2, "b1")
    assert _drain(q, limits, set(limits)) == ["a1", "b1"]
    assert len(q) == 1  # a2 is parked
    q.finished(["agent:a"])
    assert _drain(q, limits, set(limits)) == ["a2"]


def test_stale_entries_are_dropped() -> None:
    q = ReadyQueue(global_limit=10)
    q.push(1.0, 1, 0, "gone")
    q.push(1.0, 1, 1, "here")
    assert _drain(q, {"here": [], "gone": []}, {"here"}) == ["here"]
    assert len(q) == 0
