"""A leader cut off from PostgreSQL by a half-open network (issue 28, break 2): real daemons, lease 2 s, the leader
reaching the database through a proxy that stops forwarding and keeps both sockets open (no FIN, no RST).

PostgreSQL keeps the cut leader's sessions, as it would for hours behind a dead NAT. The other node takes the
leadership over once the cut leader's lease has run out on the database's clock and then its tasks (node-lost),
within a bound of a few leases while the cut lasts; by the agents' own log no task runs on two nodes at once, the
cut node writes nothing after the take-over and leaves once the way is back, and the mission completes."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.e2e.test_cluster_pause import check_story, leader, running_on, started
from tests.support.cluster import Cluster, cluster_on
from tests.support.pg_proxy import proxied
from tests.support.postgres import PgCluster

pytestmark = pytest.mark.slow

LEASE = 2.0
TAKEN_WITHIN = 6 * LEASE  # a bound for the wait, well above the ~2 leases it takes (the report prints it)


def _at(e: dict[str, object]) -> float:
    return datetime.fromisoformat(str(e["ts"])).timestamp()


def _mission(c: Cluster, n: int, go: Path) -> None:
    """Tasks that work (a tick in runs.log every 0.1 s) until ``go`` exists: still running whenever the test cuts,
    however slow the machine."""
    tick = 'echo "tick $POLPO_TASK_ID $POLPO_CLUSTER_NODE $$ $EPOCHREALTIME" >> ' + str(c.root / "runs.log")
    tasks = [{"title": f"P{i}", "assignTo": "shell",
              "description": f"while [ ! -f {go} ]; do sleep 0.1; {tick}; done; echo {i} > p{i}.txt",
              "expectations": [{"type": "file_exists", "path": f"p{i}.txt"}]} for i in range(n)]
    (c.missions / "cut.json").write_text(json.dumps(
        {"name": "cut", "workspace": str(c.shared / "cut"), "settings": {"affinity": "any"}, "tasks": tasks}))


def test_a_leader_behind_a_half_open_network_is_replaced_and_its_tasks_taken_over(
        postgres_cluster: PgCluster) -> None:
    with cluster_on(postgres_cluster, "halfopen") as (c, pg, db), proxied(pg.url(db), pg.port) as (proxy, url):
        try:
            go = c.root / "go"
            c.add("x", concurrency=4, lease=LEASE, url=url)
            c.start("x")
            started(c, "x")  # alone: it leads
            _mission(c, 4, go)
            assert leader(c, "x") == "x"
            c.wait("x", lambda evs: len(running_on(evs, "x")) == 4, 60)  # it runs every task
            c.add("y", concurrency=4, lease=LEASE)
            c.start("y")
            started(c, "y")
            proxy.blackhole()
            cut = time.time()
            evs = c.wait("y", lambda evs: any(e["event"] == "cluster:node-lost" and e["data"]["node"] == "x"
                                              for e in evs), TAKEN_WITHIN)
            lost = next(e for e in evs if e["event"] == "cluster:node-lost")
            head = next(e for e in evs if e["event"] == "cluster:leader" and e["node"] == "y")
            print(f"cut at 0; y leads at {_at(head) - cut:.2f} s, x's tasks taken at {_at(lost) - cut:.2f} s")
            assert len(lost["data"]["tasks"]) == 4
            c.wait("y", lambda evs: len(running_on(evs, "y")) == 4, 30)  # x's tasks run on y, the cut still on
        finally:
            proxy.heal()
        assert c.exited("x", 30) == 1  # the way back: it finds itself fenced and leaves
        assert "leaving the cluster" in c.output("x")
        c.start("x")  # as its service manager would: a new incarnation
        c.wait("y", lambda evs: any(e["event"] == "orchestrator:started" and e.get("node") == "x"
                                    and e["seq"] > lost["seq"] for e in evs), 60)
        go.touch()
        check_story(c, "x", "cut", 4)
