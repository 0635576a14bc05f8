"""A leader whose term is ended at the database while its lease holds (the leader's row handed on) steps down without
exiting and competes again: two depositions in a row, both nodes stay up, a leader is elected after each, and the
mission completes with every task run once."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.cluster import END_LEADER_TERM, Cluster, cluster_on, gapless, overlapping_runs
from tests.support.postgres import PgCluster

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(postgres_cluster: PgCluster) -> Iterator[tuple[Cluster, PgCluster, str]]:
    with cluster_on(postgres_cluster, "leader") as c:
        yield c


def leaders(evs: list[dict[str, object]]) -> list[object]:
    return [e["node"] for e in evs if e["event"] == "cluster:leader"]


def test_a_deposed_leader_steps_down_and_the_cluster_goes_on(
        cluster: tuple[Cluster, PgCluster, str]) -> None:
    c, pg, db = cluster
    for name in ("a", "b"):
        c.add(name, concurrency=3, lease=2)
        c.start(name)
    c.wait("b", lambda evs: len(leaders(evs)) == 1 and any(
        e["event"] == "orchestrator:started" and e.get("node") == "b" for e in evs), 30)
    tasks = [{"title": f"T{i}", "assignTo": "shell", "description": f"sleep 0.5; echo {i} > t{i}.txt",
              "expectations": [{"type": "file_exists", "path": f"t{i}.txt"}],
              **({"dependsOn": [f"T{i - 4}"]} if i >= 4 else {})} for i in range(16)]
    (c.missions / "lead.json").write_text(json.dumps(
        {"name": "lead", "workspace": str(c.shared / "lead"), "settings": {"affinity": "any"}, "tasks": tasks}))
    c.wait("a", lambda evs: sum(e["event"] == "agent:spawned" for e in evs) >= 3, 60)
    for n in (2, 3):  # end the leader's term twice: a new election each time
        assert pg.psql(END_LEADER_TERM, db).strip() == "1"
        c.wait("a", lambda evs, n=n: len(leaders(evs)) >= n, 30)
        c.wait("a", lambda evs, n=n: sum(e["event"] == "agent:spawned" for e in evs) >= 3 + 4 * (n - 1), 60)
    evs = c.wait("a", lambda evs: any(e["event"] == "mission:completed" for e in evs), 120)
    assert all(node.proc is not None and node.proc.poll() is None for node in c.nodes.values())  # nobody exited
    completed = [e for e in evs if e["event"] == "mission:completed"]
    assert len(completed) == 1 and completed[0]["data"]["outcome"] == "completed"
    assert len(leaders(evs)) >= 3
    assert gapless(evs)
    runs = c.runs()
    assert overlapping_runs(runs) == []
    ended = [r[1] for r in runs if r[0] == "end" and r[4] == "0"]
    assert sorted(ended) == sorted(f"lead:{i}" for i in range(1, 17))  # each task ran once
    assert not any(e["event"] == "task:recovered" for e in evs)  # no node died: nothing was interrupted
