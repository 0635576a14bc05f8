"""A PostgreSQL restart is a pause for a cluster: three daemons with ``lease = 30`` on a private server that is
stopped (``pg_ctl stop -m fast``) mid-mission and started again 10 s later. No daemon exits, the mission
completes with every task done, no run whose result was stored runs again, no task's agent runs on two nodes at
once, and every node's events.jsonl is the same gapless sequence. ``polpo status`` during the outage says in one
line that the store cannot be reached, without a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster, gapless, overlapping_runs, runs_after_pass
from tests.support.postgres import PgCluster, running_cluster

pytestmark = pytest.mark.slow

NAMES = ("a", "b", "c")
TASKS = 42


@pytest.fixture
def cluster() -> Iterator[tuple[Cluster, PgCluster]]:
    """A server of this test's own: it is stopped and started, which the session's shared one must not see."""
    with running_cluster() as pg:
        db = pg.create_database("restart")
        root = Path(tempfile.mkdtemp(prefix="polpo-pgrestart-"))
        c = Cluster(root, pg.url(db))
        try:
            yield c, pg
        finally:
            c.stop_all()


def _mission(c: Cluster) -> dict[str, object]:
    tasks: list[dict[str, object]] = []
    for i in range(TASKS):
        t: dict[str, object] = {"title": f"R{i}", "assignTo": "shell",
                                "description": f"sleep 1.{i % 5}; echo {i} > r{i}.txt",
                                "expectations": [{"type": "file_exists", "path": f"r{i}.txt"}]}
        if i >= 12:  # chains and fan-ins: dependents offered only after the restart
            t["dependsOn"] = sorted({f"R{i - 12}", f"R{i - 1 - (i % 5)}"})
        tasks.append(t)
    return {"name": "restart", "workspace": str(c.shared / "restart"), "settings": {"affinity": "any"},
            "tasks": tasks}


def _done(evs: list[dict[str, object]]) -> bool:
    return any(e["event"] == "mission:completed" for e in evs)


def _passed_at(runs: list[list[str]]) -> dict[str, int]:
    """Per task: the index in runs.log of the end of its last passing run."""
    return {r[1]: i for i, r in enumerate(runs) if r[0] == "end" and r[4] == "0"}


def _status(c: Cluster, name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "polpo", "status", "--config", str(c.nodes[name].config)],
                          capture_output=True, text=True, timeout=60, check=False)


def _running_mission(c: Cluster) -> None:
    """Three nodes (lease 30 s) started, the mission dropped, and its first agents running."""
    for name in NAMES:
        c.add(name, concurrency=4, lease=30)
        c.start(name)
    for name in NAMES:
        c.wait(name, lambda evs, name=name: any(e["event"] == "orchestrator:started" and e.get("node") == name
                                                for e in evs), 30)
    (c.missions / "restart.json").write_text(json.dumps(_mission(c)))
    c.wait("a", lambda evs: sum(e["event"] == "agent:spawned" for e in evs) >= 8, 60)


def test_a_postgres_restart_under_three_nodes_is_a_pause(cluster: tuple[Cluster, PgCluster]) -> None:
    c, pg = cluster
    _running_mission(c)
    pg.stop_server("fast")
    with open(c.root / "runs.log", "a") as f:
        f.write("db-stopped - - -\n")
    time.sleep(3)
    during = _status(c, "a")
    time.sleep(7)
    pg.start_server()
    with open(c.root / "runs.log", "a") as f:
        f.write("db-started - - -\n")
    logs = {name: c.wait(name, _done, 150) for name in NAMES}
    exited = {n: node.proc.poll() for n, node in c.nodes.items() if node.proc is None or node.proc.poll() is not None}
    out = {n: (c.root / n / "daemon.out").read_text(errors="replace") for n in NAMES}
    assert exited == {}, {n: out[n][-3000:] for n in exited}
    assert during.returncode != 0 and "Traceback" not in during.stderr, during.stderr
    assert len(during.stderr.strip().splitlines()) == 1, during.stderr
    evs = logs["a"]
    completed = [e for e in evs if e["event"] == "mission:completed"]
    assert len(completed) == 1 and completed[0]["data"]["outcome"] == "completed", completed
    for name in NAMES:
        assert gapless(logs[name]), name
    shortest = min(len(v) for v in logs.values())
    assert all(v[:shortest] == evs[:shortest] for v in logs.values())  # one story, told the same on every node
    runs = c.runs()
    assert overlapping_runs([r for r in runs if not r[0].startswith("db-")]) == []
    assert runs_after_pass(runs, _passed_at(runs)) == []
    assert set(_passed_at(runs)) == {f"restart:{i}" for i in range(1, TASKS + 1)}
    assert all((c.shared / "restart" / f"r{i}.txt").exists() for i in range(TASKS))
    for name in NAMES:  # each component waited the outage out in a line or two, none with a traceback
        assert "waits for the database" in out[name] and "Traceback" not in out[name], out[name][-6000:]


def test_nodes_killed_during_a_postgres_restart_and_started_again_finish_the_mission(
        cluster: tuple[Cluster, PgCluster]) -> None:
    """The issue's operator restarted every node by hand after the database came back: the mission stuck with
    dependent tasks never offered. Here each node is killed (-9) while the server is down, then started again."""
    c, pg = cluster
    _running_mission(c)
    pg.stop_server("fast")
    time.sleep(3)  # agents end meanwhile; their results wait in the writers' queues
    for name in NAMES:
        c.kill(name)
    pg.start_server()
    for name in NAMES:
        c.start(name)
    logs = {name: c.wait(name, _done, 150) for name in NAMES}
    evs = logs["a"]
    completed = [e for e in evs if e["event"] == "mission:completed"]
    assert len(completed) == 1 and completed[0]["data"]["outcome"] == "completed", completed
    for name in NAMES:
        assert gapless(logs[name]), name
    shortest = min(len(v) for v in logs.values())
    assert all(v[:shortest] == evs[:shortest] for v in logs.values())
    runs = c.runs()
    assert overlapping_runs(runs) == []
    assert runs_after_pass(runs, _passed_at(runs)) == []
    assert set(_passed_at(runs)) == {f"restart:{i}" for i in range(1, TASKS + 1)}
