"""A node cut off from PostgreSQL by a half-open network exits promptly (issue 28, break 3).

Between the node and the database, a proxy stops passing bytes but keeps both sockets open (a cut cable, a dead
NAT: no FIN, no RST). The node's own clock fences it (no heartbeat renewed for 2/3 of its lease): it kills its
agents and leaves. Before, its shutdown then waited without a deadline on the dead sockets (follower drain,
membership leave, pool close) and the process stayed alive until the network healed. Now every step has a
deadline: it exits 1 with a one-line reason within seconds, and its agents are dead. A plain stop (SIGTERM)
during a cut ends within its bound as well."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator

import pytest

from tests.support.cluster import Cluster, cluster_on, ticking
from tests.support.postgres import PgCluster
from tests.support.procs import is_dead
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow

LEASE = 2.0
EXIT_WITHIN = 15.0  # own clock's verdict (2/3 lease) + the shutdown's deadlines, with room for a loaded machine


@pytest.fixture
def cut(postgres_cluster: PgCluster) -> Iterator[tuple[Cluster, TcpProxy]]:
    with cluster_on(postgres_cluster, "halfopen") as (c, pg, db), TcpProxy(pg.port) as proxy:
        c.add("x", concurrency=2, lease=LEASE, url=f"postgresql://postgres@127.0.0.1:{proxy.port}/{db}")
        try:
            yield c, proxy
        finally:
            proxy.heal()  # whatever the test did, the stop must not wait on the cut


def running(c: Cluster, n: int) -> set[int]:
    c.start("x")
    tasks = [{"title": f"H{i}", "assignTo": "shell", "description": ticking(c.root, 60.0, f"echo {i} > h{i}.txt"),
              "expectations": [{"type": "file_exists", "path": f"h{i}.txt"}]} for i in range(n)]
    (c.missions / "cut.json").write_text(json.dumps({"name": "cut", "workspace": str(c.shared / "cut"),
                                                     "tasks": tasks}))
    c.wait("x", lambda evs: sum(e["event"] == "agent:spawned" for e in evs) == n, 60)
    deadline = time.monotonic() + 30
    while len({r[3] for r in c.runs() if r[0] == "start"}) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    return {int(r[3]) for r in c.runs() if r[0] == "start"}


def reason_line(c: Cluster) -> str:
    lines = [ln for ln in c.output("x").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def test_a_node_fenced_behind_a_half_open_network_exits_with_its_reason(cut: tuple[Cluster, TcpProxy]) -> None:
    c, proxy = cut
    pids = running(c, 2)
    proxy.blackhole()
    rc = c.exited("x", EXIT_WITHIN)  # before: it waited for the network, forever with a permanent cut
    assert rc == 1
    assert "leaving the cluster" in c.output("x")
    last = reason_line(c)
    assert last.startswith("polpo: stopped:") and "heartbeat" in last, last
    assert all(is_dead(p) for p in pids)


def test_a_stop_asked_for_during_a_cut_ends_within_its_bound(cut: tuple[Cluster, TcpProxy]) -> None:
    c, proxy = cut
    pids = running(c, 1)
    proxy.blackhole()
    node = c.nodes["x"]
    assert node.proc is not None
    node.proc.send_signal(signal.SIGTERM)
    c.exited("x", EXIT_WITHIN)
    assert all(is_dead(p) for p in pids)
    assert "Traceback" not in c.output("x")
