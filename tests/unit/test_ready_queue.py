"""Dispatch order and concurrency limits of the ready queue."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

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


def test_a_freed_slot_lets_out_the_best_parked_task_and_skips_one_held_by_another_limit() -> None:
    q = ReadyQueue(global_limit=10)
    limits = {"x1": [("agent:a", 1), ("mission:m", 5)], "x2": [("agent:a", 1), ("mission:n", 0)],
              "x3": [("agent:a", 1), ("mission:m", 5)]}
    q.push(3.0, 1, 0, "x1")
    q.push(2.0, 1, 1, "x2")  # better than x3, but its mission allows nothing
    q.push(1.0, 1, 2, "x3")
    assert _drain(q, limits, set(limits)) == ["x1"]
    q.finished(["agent:a", "mission:m"])
    assert _drain(q, limits, set(limits)) == ["x3"]  # x2 was let out, held by its mission, and x3 got the slot


@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from("abc"), st.sampled_from("mn")), min_size=1,
                max_size=40),
       st.lists(st.booleans(), max_size=120))
def test_dispatch_order_matches_a_brute_force_scheduler(tasks: list[tuple[int, str, str]], ops: list[bool]) -> None:
    cap = {"agent:a": 1, "agent:b": 2, "agent:c": None, "mission:m": 2, "mission:n": 3}
    q = ReadyQueue(global_limit=4)
    limits: dict[str, list[tuple[str, int | None]]] = {}
    entries = {}
    for i, (prio, agent, mission) in enumerate(tasks):
        tid = f"t{i}"
        limits[tid] = [(f"agent:{agent}", cap[f"agent:{agent}"]), (f"mission:{mission}", cap[f"mission:{mission}"])]
        entries[tid] = (-float(prio), 1, i, tid)
        q.push(float(prio), 1, i, tid)
    waiting = set(entries)
    running: list[str] = []
    used: dict[str, int] = {}

    def allowed(tid: str) -> bool:
        return len(running) < 4 and all(lim is None or used.get(k, 0) < lim for k, lim in limits[tid])

    for start in [True, *ops]:
        if start:
            got = q.pop_startable(lambda t: t in waiting, lambda t: limits[t])
            best = min((entries[t] for t in waiting if allowed(t)), default=None)
            assert got == (best[3] if best else None)
            if got is not None:
                waiting.discard(got)
                running.append(got)
                q.started([k for k, _ in limits[got]])
                for k, _ in limits[got]:
                    used[k] = used.get(k, 0) + 1
        elif running:
            done = running.pop(0)
            q.finished([k for k, _ in limits[done]])
            for k, _ in limits[done]:
                used[k] -= 1


def test_a_key_whose_runs_all_ended_is_not_kept() -> None:
    """One ``mission:<id>`` key per mission ever run was kept at 0: memory that grew with history (issue 31)."""
    q = ReadyQueue(global_limit=2)
    for i in range(100):
        q.push(0.0, i, 0, f"t{i}")
        tid = q.pop_startable(lambda _t: True, lambda t: [("agent:noop", 2), (f"mission:{t}", None)])
        assert tid == f"t{i}"
        q.started(["agent:noop", f"mission:{tid}"])
        q.finished(["agent:noop", f"mission:{tid}"])
    assert dict(q.running) == {} and q.running_total == 0
