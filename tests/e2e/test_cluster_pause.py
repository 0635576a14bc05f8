"""Paused nodes cannot act (issue 19: fencing, guards): real daemons on a real PostgreSQL, lease 2 s.

A worker SIGSTOPped 8 s while it runs tasks, or the leader paused (its connections open): by the
agents' own log no task runs on two nodes at once (overlap <= 0.5 s), the resumed node writes nothing about a task
after the take-over and leaves (exit 1), the mission completes with every task done, and every node's log is the
same gapless sequence. And the guard kills the agents of a paused daemon and of a killed one."""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import Cluster, gapless, orphans, overlaps, ticking
from tests.support.postgres import PgCluster

pytestmark = pytest.mark.slow

LEASE = 2.0
PAUSE = 8.0


@pytest.fixture
def cluster(postgres_cluster: PgCluster) -> Iterator[tuple[Cluster, PgCluster, str]]:
    db = postgres_cluster.create_database("pause")
    root = Path(tempfile.mkdtemp(prefix="polpo-pause-"))
    c = Cluster(root, postgres_cluster.url(db))
    try:
        yield c, postgres_cluster, db
    finally:
        for node in c.nodes.values():  # a node left paused by a failed test must not hang the stop
            if node.proc is not None:
                os.kill(node.proc.pid, signal.SIGCONT)
        c.stop_all()
        postgres_cluster.drop_database(db)


def started(c: Cluster, name: str) -> None:
    c.wait(name, lambda evs: any(e["event"] == "orchestrator:started" and e.get("node") == name for e in evs), 30)


def completed(evs: list[dict[str, Any]], mid: str) -> bool:
    return any(e["event"] == "mission:completed" and e.get("missionId") == mid for e in evs)


def running_on(evs: list[dict[str, Any]], node: str) -> set[str]:
    """Tasks whose agent a node spawned and that have not finished yet (by the events)."""
    spawned = {e["taskId"] for e in evs if e["event"] == "agent:spawned" and e.get("node") == node}
    finished = {e["taskId"] for e in evs if e["event"] in ("agent:finished", "agent:failed") and e.get("node") == node}
    return spawned - finished


def mission(c: Cluster, name: str, n: int, seconds: float) -> None:
    tasks = [{"title": f"P{i}", "assignTo": "shell", "description": ticking(c.root, seconds, f"echo {i} > p{i}.txt"),
              "expectations": [{"type": "file_exists", "path": f"p{i}.txt"}]} for i in range(n)]
    (c.missions / f"{name}.json").write_text(json.dumps(
        {"name": name, "workspace": str(c.shared / name), "settings": {"affinity": "any"}, "tasks": tasks}))


def leader(c: Cluster, name: str) -> str:
    """The node that leads, as ``name`` logged it (an election follows the start: wait for it)."""
    evs = c.wait(name, lambda evs: any(e["event"] == "cluster:leader" for e in evs), 30)
    return str([e for e in evs if e["event"] == "cluster:leader"][-1]["node"])


def check_story(c: Cluster, victim: str, mid: str, n: int) -> None:
    """What every pause test asserts once the mission is over (the victim restarted and caught up)."""
    logs = {name: c.wait(name, lambda evs: completed(evs, mid), 60) for name in c.nodes}
    evs = max(logs.values(), key=len)
    done = next(e for e in evs if e["event"] == "mission:completed")
    assert done["data"]["outcome"] == "completed", done["data"]
    finished = {e["taskId"] for e in evs if e["event"] == "task:transition" and e["data"].get("to") == "done"}
    assert finished == {f"{mid}:{i}" for i in range(1, n + 1)}
    for name, log in logs.items():
        assert gapless(log), name
    shortest = min(len(log) for log in logs.values())
    assert all(log[:shortest] == evs[:shortest] for log in logs.values())  # one story, on every node
    lost = [e for e in evs if e["event"] == "cluster:node-lost" and e["data"]["node"] == victim]
    assert lost, "the paused node's tasks were taken over"
    back = next(e["seq"] for e in evs if e["event"] == "orchestrator:started" and e.get("node") == victim
                and e["seq"] > lost[0]["seq"])
    stale = [e for e in evs if e.get("node") == victim and e.get("taskId") and lost[0]["seq"] < e["seq"] < back]
    assert stale == [], "the paused node wrote about tasks after they were taken over"
    worst = overlaps(c.runs())
    assert all(v <= 0.5 for v in worst.values()), worst
    assert any(r[2] == victim for r in c.runs() if r[0] == "start")  # it did run work before its pause


def pause_and_resume(c: Cluster, victim: str) -> None:
    c.pause(victim)
    time.sleep(PAUSE)  # the lease (2 s) runs out; the guard kills its agents; the leader takes its tasks over
    c.resume(victim)
    assert c.exited(victim, 30) == 1  # it finds itself fenced (or stale by its own clock) and leaves
    assert "leaving the cluster" in c.output(victim)
    c.start(victim)  # a supervisor starts it again: a new incarnation


def test_a_worker_paused_past_its_lease_never_runs_a_task_twice_at_once(cluster: tuple[Cluster, PgCluster, str]) -> None:
    c, _, _ = cluster
    for name in ("x", "y", "z"):
        c.add(name, concurrency=6, lease=LEASE)  # room on the others: a taken task runs again at once
        c.start(name)
        started(c, name)  # x starts first: it leads
    mission(c, "paused", 12, 10.0)  # the paused node's agents would still run when its tasks are taken over
    head = leader(c, "x")
    evs = c.wait(head, lambda evs: any(len(running_on(evs, n)) >= 3 for n in ("x", "y", "z") if n != head), 60)
    victim = max((n for n in ("x", "y", "z") if n != head), key=lambda n: len(running_on(evs, n)))
    pause_and_resume(c, victim)
    check_story(c, victim, "paused", 12)


def test_a_paused_leader_is_replaced_and_never_runs_a_task_twice_at_once(
        cluster: tuple[Cluster, PgCluster, str]) -> None:
    """Its connections stay open (a session lock held by one kept the cluster without a leader before issue 28):
    its term ends with its lease, on the database's clock."""
    c, _, _ = cluster
    c.add("x", concurrency=4, lease=LEASE)
    c.start("x")
    started(c, "x")  # alone: it leads, and runs four tasks itself
    mission(c, "lead", 12, 10.0)
    head = leader(c, "x")
    c.wait(head, lambda evs: len(running_on(evs, head)) == 4, 60)
    for name in ("y", "z"):  # room for the rest and for the leader's tasks once they are taken over
        c.add(name, concurrency=6, lease=LEASE)
        c.start(name)
        started(c, name)
    c.pause(head)
    time.sleep(PAUSE)
    c.resume(head)
    assert c.exited(head, 30) == 1
    assert "leaving the cluster" in c.output(head)
    c.start(head)
    check_story(c, head, "lead", 12)
    assert any(e["event"] == "cluster:leader" and e["node"] != head for e in c.events(head))


def _agent_pids(c: Cluster, node: str) -> set[int]:
    return {int(r[3]) for r in c.runs() if r[0] == "start" and r[2] == node}


def _gone(pids: set[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{p}").exists() and ") Z " not in _stat(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


def _stat(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ") Z "


def test_the_guard_kills_the_agents_of_a_paused_daemon_and_of_a_killed_one(
        cluster: tuple[Cluster, PgCluster, str]) -> None:
    c, _, _ = cluster
    c.add("g", concurrency=3, lease=LEASE)
    c.start("g")
    started(c, "g")
    mission(c, "guarded", 3, 60.0)
    c.wait("g", lambda evs: len(running_on(evs, "g")) == 3, 60)
    pids = _agent_pids(c, "g")
    assert len(pids) == 3 and not _gone(pids, 0.5)
    c.pause("g")
    assert _gone(pids, 10)  # the guard's deadline is lease/2: well within the bound
    c.resume("g")
    assert c.exited("g", 30) == 1
    c.start("g")  # back: it recovers the three tasks (interrupted) and runs them again
    c.wait("g", lambda evs: len(running_on(evs, "g")) == 3 and len(_agent_pids(c, "g") - pids) == 3, 60)
    again = _agent_pids(c, "g") - pids
    c.kill("g")  # kill -9: the guard's pipe closes
    assert _gone(again, 10)
    assert orphans(c.root) == []
