"""Several daemons on one PostgreSQL: a mission with "affinity": "any" runs on both nodes and survives a
kill -9 of one of them; a chaos run of three nodes, a 300-task mission with dependencies and fix loops and ten
random kill -9s ends with every task done, none run twice beyond its policy, one gapless event sequence on
every node and no orphan process."""

from __future__ import annotations

import json
import random
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster, gapless, orphans, overlapping_runs, runs_after_pass
from tests.support.postgres import PgCluster

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(postgres_cluster: PgCluster) -> Iterator[Cluster]:
    db = postgres_cluster.create_database("cluster")
    root = Path(tempfile.mkdtemp(prefix="polpo-cluster-"))
    c = Cluster(root, postgres_cluster.url(db))
    try:
        yield c
    finally:
        c.stop_all()
        postgres_cluster.drop_database(db)


def done(evs: list[dict[str, object]], mid: str) -> bool:
    return any(e["event"] == "mission:completed" and e.get("missionId") == mid for e in evs)


def passed_lines(runs: list[list[str]], evs: list[dict[str, object]]) -> dict[str, int]:
    """Per task: the index in runs.log of the end of its last run (it passed after it)."""
    out: dict[str, int] = {}
    for i, r in enumerate(runs):
        if r[0] == "end" and r[4] == "0":
            out[r[1]] = i
    return out


def test_an_any_affinity_mission_runs_on_both_nodes_and_survives_a_kill(cluster: Cluster) -> None:
    for name in ("a", "b"):
        cluster.add(name, concurrency=3, lease=2)
        cluster.start(name)
    cluster.wait("b", lambda evs: any(e["event"] == "orchestrator:started" for e in evs), 30)
    tasks = [{"title": f"T{i}", "assignTo": "shell", "description": f"sleep 1.5; echo {i} > t{i}.txt",
              "expectations": [{"type": "file_exists", "path": f"t{i}.txt"}]} for i in range(12)]
    (cluster.missions / "both.json").write_text(json.dumps(
        {"name": "both", "workspace": str(cluster.shared / "both"), "settings": {"affinity": "any"}, "tasks": tasks}))
    cluster.wait("a", lambda evs: sum(e["event"] == "agent:spawned" and e.get("node") == "b" for e in evs) >= 2
                 and sum(e["event"] == "agent:spawned" and e.get("node") == "a" for e in evs) >= 2, 60)
    victim = next(e["node"] for e in cluster.events("a") if e["event"] == "cluster:leader")
    survivor = "b" if victim == "a" else "a"
    cluster.kill(victim)  # the leader itself: the other takes over leadership and the victim's tasks
    evs = cluster.wait(survivor, lambda evs: done(evs, "both"), 90)
    completed = next(e for e in evs if e["event"] == "mission:completed")
    assert completed["data"]["outcome"] == "completed"
    assert {e["node"] for e in evs if e["event"] == "agent:spawned"} == {"a", "b"}  # events name both nodes
    assert any(e["event"] == "cluster:node-lost" and e["data"]["node"] == victim for e in evs)
    assert any(e["event"] == "cluster:leader" and e["node"] == survivor for e in evs)
    assert gapless(evs)
    runs = cluster.runs()
    assert overlapping_runs(runs) == []
    assert runs_after_pass(runs, passed_lines(runs, evs)) == []
    ended = {r[1] for r in runs if r[0] == "end" and r[4] == "0"}
    assert ended == {f"both:{i}" for i in range(1, 13)}
    assert all((cluster.shared / "both" / f"t{i}.txt").exists() for i in range(12))
    victim_log = cluster.events(victim)
    assert victim_log == evs[:len(victim_log)]  # what the dead node wrote is a prefix of the whole story


def _chaos_mission(cluster: Cluster, n: int) -> dict[str, object]:
    tasks = []
    for i in range(n):
        t: dict[str, object] = {"title": f"C{i}", "assignTo": "shell",
                                "description": f"sleep 0.{random.randint(5, 9)}; echo {i} > c{i}.txt",
                                "expectations": [{"type": "file_exists", "path": f"c{i}.txt"}]}
        if i % 10 == 3:  # a fix loop: the first attempt fails its test, the fix attempt passes
            t["description"] = (f"n=$(cat n{i} 2>/dev/null || echo 0); echo $((n+1)) > n{i}; "
                                + str(t["description"]))
            t["expectations"] = [{"type": "test", "command": f"test $(cat n{i}) -ge 2"}]
        if i >= 20:  # chains and fan-ins
            t["dependsOn"] = sorted({f"C{i - 20}", f"C{i - 1 - (i % 7)}"})
        tasks.append(t)
    return {"name": "chaos", "workspace": str(cluster.shared / "chaos"), "settings": {"affinity": "any"},
            "tasks": tasks}


def test_chaos_three_nodes_ten_kills_every_task_done_once(cluster: Cluster) -> None:
    seed = int(time.time())
    print(f"chaos seed {seed}")
    rng = random.Random(seed)
    random.seed(seed)
    names = ["x", "y", "z"]
    for name in names:
        cluster.add(name, concurrency=4, lease=2, retries=1, fixes=2)
        cluster.start(name)
    cluster.wait("z", lambda evs: any(e["event"] == "orchestrator:started" and e.get("node") == "z"
                                      for e in evs), 30)
    (cluster.missions / "chaos.json").write_text(json.dumps(_chaos_mission(cluster, 300)))
    cluster.wait("x", lambda evs: any(e["event"] == "mission:accepted" for e in evs), 30)
    kills = 0
    deadline = time.monotonic() + 240
    while kills < 10 and time.monotonic() < deadline:
        time.sleep(rng.uniform(0.5, 2.0))
        alive = [n for n in names if cluster.nodes[n].proc is not None]
        if len(alive) == 1 or done(cluster.events(alive[0]), "chaos"):
            break
        victim = rng.choice(alive)
        cluster.kill(victim)
        kills += 1
        time.sleep(rng.uniform(0.2, 1.5))
        cluster.start(victim)  # it comes back: kills its orphans, joins again
    for n in names:
        if cluster.nodes[n].proc is None:
            cluster.start(n)
    evs = cluster.wait("x", lambda evs: done(evs, "chaos"), 240)
    completed = next(e for e in evs if e["event"] == "mission:completed")
    assert completed["data"]["outcome"] == "completed", completed["data"]["report"]["summary"]
    print(f"chaos: {kills} kills, {sum(e['event'] == 'task:recovered' for e in evs)} attempts recovered")
    assert kills == 10, f"only {kills} kills happened before the mission ended"
    for n in names:  # every node's log is the same gapless sequence (a node killed last may lag: prefix)
        log = cluster.wait(n, lambda evs: done(evs, "chaos"), 60)
        assert gapless(log)
    assert cluster.events("x")[:len(cluster.events("y"))] == cluster.events("y")[:len(cluster.events("x"))]
    runs = cluster.runs()
    assert overlapping_runs(runs) == []
    assert runs_after_pass(runs, passed_lines(runs, evs)) == []
    assert {r[1] for r in runs if r[0] == "end" and r[4] == "0"} >= {f"chaos:{i}" for i in range(1, 301)
                                                                      if i % 10 != 4}
    spawned = [e for e in evs if e["event"] == "agent:spawned"]
    counted = [e for e in spawned if e["data"].get("kind") != "initial"]
    assert len({e["node"] for e in spawned}) == 3 and counted  # all three ran work; fix loops happened
    cluster.stop_all()
    time.sleep(0.5)
    assert orphans(cluster.root) == []
