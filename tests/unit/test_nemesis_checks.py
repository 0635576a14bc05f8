"""The nemesis's pure parts (tests/nemesis): a seed is always the same plan, the ledger reads back as runs, and
each invariant catches the history that breaks it (an invariant that cannot fail would prove nothing)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from tests.nemesis.invariants import History, check
from tests.nemesis.ledger import Run, parse, runs
from tests.nemesis.plan import FAULTS, TOPOLOGIES, make_plan
from tests.nemesis.supervisor import Life


def test_a_seed_is_always_the_same_plan_and_seeds_differ() -> None:
    assert make_plan(17) == make_plan(17)
    assert make_plan(17).describe() == make_plan(17).describe()
    assert len({make_plan(s).describe() for s in range(20)}) == 20
    narrowed = make_plan(3, topology="sqlite", kinds=("kill-guard", "guard-then-daemon"))
    assert narrowed.topology == "sqlite" and narrowed.kinds() <= {"kill-guard", "guard-then-daemon"}
    assert make_plan(17).rerun() == "scripts/nemesis.py --seed 17"
    assert narrowed.rerun() == "scripts/nemesis.py --seed 3 --topology sqlite --faults kill-guard,guard-then-daemon"
    assert narrowed != make_plan(3)  # why a narrowed seed's rerun must say how it was narrowed


def test_faults_on_one_target_never_overlap_and_every_kind_is_drawn() -> None:
    seen: set[str] = set()
    for seed in range(300):
        plan = make_plan(seed)
        seen |= plan.kinds()
        assert plan.topology in TOPOLOGIES
        by_target: dict[str, list[tuple[float, float]]] = {}
        for f in plan.faults:
            by_target.setdefault(f.target, []).append((f.start, f.end))
        for spans in by_target.values():
            spans.sort()
            assert all(a[1] < b[0] for a, b in itertools.pairwise(spans)), (seed, spans)
    assert seen == set(FAULTS)


def test_the_ledger_reads_back_as_runs(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.log"
    ledger.write_text("start 10.0 m1:1 1 a 100 50\nbeat 10.5 m1:1 1 a 100 50\nstart 10.2 m1:2 1 a 101 50\n"
                      "end 11.0 m1:1 1 a 100 50 0\nbeat 10.7 m1:2 1 a 101 50\nbeat 11.")  # a torn last line
    [one, two] = runs(parse(ledger))
    assert (one.task, one.attempt, one.start, one.end, one.rc, one.killed) == ("m1:1", 1, 10.0, 11.0, 0, False)
    assert (two.task, two.last, two.killed) == ("m1:2", 10.7, True)


def run(task: str, attempt: int, node: str, pid: int, start: float, last: float, *, ppid: int = 1,
        end: bool = True) -> Run:
    return Run(task, attempt, node, pid, ppid, start, last, last if end else None, 0 if end else None)


def history(**kw: Any) -> History:
    base: dict[str, Any] = {"plan": make_plan(1), "t0": 0.0, "healed": 100.0, "runs": [], "logs": {},
                            "store": {}, "lives": {}}
    return History(**(base | kw))


def event(seq: int, name: str = "task:transition", mission: str | None = "m1", **data: Any) -> dict[str, Any]:
    return {"seq": seq, "ts": "2026-01-01T00:00:00.000Z", "event": name, "missionId": mission, "data": data}


def stored(e: dict[str, Any]) -> dict[str, Any]:
    return {"seq": e["seq"], "ts": e["ts"], "event": e["event"], "mission_id": e.get("missionId"),
            "task_id": e.get("taskId"), "data": json.dumps(e["data"])}


def test_two_runs_of_one_task_alive_at_once_break_no_overlap_and_a_freeze_is_allowed_its_moment() -> None:
    a, b = run("m1:1", 1, "a", 10, 0.0, 5.0, end=False), run("m1:1", 2, "b", 20, 4.0, 8.0)
    assert check(history(runs=[a, b]))["no-overlap"]
    assert not check(history(runs=[a, run("m1:1", 2, "b", 20, 5.5, 8.0)]))["no-overlap"]
    frozen = run("m1:1", 1, "a", 10, 0.0, 9.3, end=False)  # beat once right after its node's SIGCONT at 9.0
    assert not check(history(runs=[frozen, b], freezes={"a": [(3.0, 9.0)]}))["no-overlap"]
    assert check(history(runs=[frozen, b], freezes={}))["no-overlap"]


def test_an_attempt_run_twice_and_a_task_run_again_after_a_stored_pass_are_caught() -> None:
    twice = [run("m1:1", 1, "a", 10, 0.0, 1.0), run("m1:1", 1, "b", 20, 2.0, 3.0)]
    assert check(history(runs=twice))["attempt-once"]
    again = [run("m1:1", 1, "a", 10, 0.0, 1.0), run("m1:1", 2, "a", 11, 2.0, 3.0)]
    rows = [{"task_id": "m1:1", "number": 1, "status": "finished", "verdict": "passed", "exit_code": 0}]
    assert check(history(runs=again, store={"attempts": rows}))["stored-result"]
    rows[0]["verdict"] = "failed"
    assert not check(history(runs=again, store={"attempts": rows}))["stored-result"]


def test_a_log_with_a_gap_a_duplicate_or_another_story_than_the_store_is_caught() -> None:
    evs = [event(1), event(2), event(3)]
    store = {"events": [stored(e) for e in evs]}
    assert not check(history(logs={"a": evs}, store=store))["logs"]
    assert check(history(logs={"a": [evs[0], evs[2]]}, store=store))["logs"]
    assert check(history(logs={"a": [evs[0], evs[1], evs[1]]}, store=store))["logs"]
    assert check(history(logs={"a": [evs[0], event(2, "mission:completed"), evs[2]]}, store=store))["logs"]
    assert check(history(logs={"a": evs[:2]}, store=store, quiet_seq=3))["logs"]  # behind at the end


def test_a_mission_that_never_ends_or_ends_too_late_is_caught() -> None:
    accepted = stored(event(1, "mission:accepted", "m1"))
    late = stored(event(2, "mission:completed", "m1") | {"ts": "2026-01-01T01:00:00.000Z"})
    h = history(store={"events": [accepted]})
    assert "mission m1 never ended" in check(h)["missions-end"]
    h = history(store={"events": [accepted, late]}, healed=1767225600.0)  # 2026-01-01T00:00Z
    assert any("after the last fault healed" in v for v in check(h)["missions-end"])


def test_a_schedule_firing_twice_for_a_slot_is_caught() -> None:
    fired = stored(event(1, "schedule:triggered", None, scheduleId="s", scheduledFor="T1"))
    assert check(history(store={"events": [fired, fired | {"seq": 2}]}))["schedule-slot"]


def test_an_agent_that_outlives_its_daemon_and_a_daemon_that_hangs_or_dies_without_a_reason_are_caught() -> None:
    life = Life(pid=50, started=0.0, ended=10.0, rc=None, killed_by="kill -9 daemon")
    orphan = run("m1:1", 1, "a", 10, 0.0, 30.0, ppid=50, end=False)
    assert check(history(runs=[orphan], lives={"a": [life]}))["agents-die"]
    assert not check(history(runs=[run("m1:1", 1, "a", 10, 0.0, 10.5, ppid=50, end=False)],
                             lives={"a": [life]}))["agents-die"]
    started = {"a": [event(1, "orchestrator:started", None, pid=60)]}
    crashed = Life(pid=60, started=0.0, ended=5.0, rc=1, lines=[(4.0, "Traceback (most recent call last):")])
    assert check(history(lives={"a": [crashed]}, logs=started))["daemons"]
    hung = Life(pid=60, started=0.0, ended=90.0, rc=1, lines=[(89.0, "polpo: stopped: fenced")], leaving_at=10.0)
    assert any("half-alive" in v for v in check(history(lives={"a": [hung]}, logs=started))["daemons"])
    clean = Life(pid=60, started=0.0, ended=20.0, rc=1, lines=[(19.0, "polpo: stopped: fenced")], leaving_at=15.0)
    assert not check(history(lives={"a": [clean]}, logs=started))["daemons"]
    # stopped by the nemesis for 16 s of its 18 s stop (seed 1012): the time it was stopped is not its own
    paused = Life(pid=60, started=0.0, ended=28.0, rc=1, lines=[(27.0, "polpo: stopped: fenced")], leaving_at=10.0)
    assert not check(history(lives={"a": [paused]}, logs=started, paused={"a": [(10.5, 26.5)]}))["daemons"]
    assert check(history(lives={"a": [paused]}, logs=started, paused={"b": [(10.5, 26.5)]}))["daemons"]


def test_spend_the_store_did_not_count_is_caught() -> None:
    h = history(served={"m1:2": 5000}, store={"spend": [{"key": "m1:2", "tokens": 2500, "calls": 1}]})
    assert check(h)["spend"]
    h = history(served={"m1:2": 5000}, store={"spend": [{"key": "m1:2", "tokens": 5000, "calls": 2}]})
    assert not check(h)["spend"]


def test_a_leader_cut_off_for_long_and_not_replaced_is_caught() -> None:
    lead = stored(event(1, "cluster:leader", None, node="a") | {"ts": "2026-01-01T00:00:00.000Z"})
    other = stored(event(2, "cluster:leader", None, node="b") | {"ts": "2026-01-01T00:00:14.000Z"})
    cut = 1767225605.0  # 2026-01-01T00:00:05Z
    h = history(cuts={"a": [(cut, cut + 20)]}, store={"events": [lead, other]})
    assert check(h)["leader-cut"]  # b led 9 s after the cut: more than 3 leases of 2 s
    soon = other | {"ts": "2026-01-01T00:00:09.000Z"}
    assert not check(history(cuts={"a": [(cut, cut + 20)]}, store={"events": [lead, soon]}))["leader-cut"]
    assert not check(history(cuts={"b": [(cut, cut + 20)]}, store={"events": [lead, other]}))["leader-cut"]
    # b was cut off too until 00:00:12 (seed 7110): nobody could lead before; b led 2 s after, in time
    both = {"a": [(cut, cut + 20)], "b": [(cut, cut + 7)]}
    assert not check(history(cuts=both, store={"events": [lead, other]}))["leader-cut"]
    late = other | {"ts": "2026-01-01T00:00:19.000Z"}  # 7 s after b could reach it: more than 3 leases
    assert check(history(cuts=both, store={"events": [lead, late]}))["leader-cut"]
    # PostgreSQL itself down until 00:00:12 (seed 10001: stopped 1.7 s into a's cut): nobody could lead before
    down = {"a": [(cut, cut + 20)], "pg": [(cut + 2, cut + 7)]}
    assert not check(history(cuts=down, store={"events": [lead, other]}))["leader-cut"]
    assert check(history(cuts=down, store={"events": [lead, late]}))["leader-cut"]
