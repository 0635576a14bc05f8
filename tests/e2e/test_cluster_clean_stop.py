"""A clean stop of a cluster node exits 0 with every write made, however late its last writes come (nemesis seed
12466).

A node leaves the cluster on a clean stop by deleting its row, so the others see it gone at once. Before, the stop
left first and drained the notifications after: a delivery that ended then submitted its outcome event, the
database's fence found the row gone and refused it, and the node took that for a lost lease: a SIGTERM exited 1
("no longer holds its lease"), and the outcome event was lost. Now every write is made before the node leaves, and
a write after its own leave is refused quietly."""

from __future__ import annotations

import signal

import anyio
import asyncpg
import pytest

from tests.support.cluster import cluster_on
from tests.support.postgres import PgCluster

pytestmark = pytest.mark.slow

SLOW_CHANNEL = """
[channels.slow]
type = "command"
argv = ["sh", "-c", "cat > /dev/null; sleep 0.6; printf x >> '{out}'"]
timeout = 10

[[notify.rules]]
events = ["orchestrator:shutdown"]
channels = ["slow"]
"""


async def outcomes(url: str) -> list[str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT event FROM events WHERE event LIKE 'notification:%' ORDER BY seq")
        return [r["event"] for r in rows]
    finally:
        await conn.close()


def test_a_notification_delivered_during_a_clean_stop_is_recorded_and_the_node_exits_0(
        postgres_cluster: PgCluster) -> None:
    with cluster_on(postgres_cluster, "cleanstop") as (c, _pg, _db):
        node = c.add("a", lease=6.0)  # a stop step may take half a lease: room for the delivery on a loaded machine
        delivered = c.root / "delivered.txt"
        with node.config.open("a") as f:
            f.write(SLOW_CHANNEL.format(out=delivered))
        c.start("a")
        c.wait("a", lambda evs: any(e["event"] == "orchestrator:started" for e in evs), 60)
        assert node.proc is not None
        node.proc.send_signal(signal.SIGTERM)
        rc = c.exited("a", 30)
        out = c.output("a")
        assert rc == 0, out  # before: 1, "no longer holds its lease" after its own leave
        assert "no longer holds its lease" not in out and "was not made" not in out
        assert delivered.exists(), out
        assert delivered.read_text() == "x"  # the delivery ran during the stop
        assert anyio.run(outcomes, c.url) == ["notification:sent"]  # and its outcome was written

