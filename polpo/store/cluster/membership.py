"""A node's membership: its row in ``nodes``, renewed by a heartbeat; a node whose heartbeat is older than the
lease is dead, and the leader takes over its claims.

Time is the database's (``clock_timestamp()``), so clock skew between machines does not matter. Each start is a
new *incarnation*: a node that restarts after ``kill -9`` does not inherit the claims of its previous life (the
leader sees them as dead, records their attempts as interrupted and offers the tasks again).
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable
from typing import Any

import anyio

from polpo.store.errors import StoreError

log = logging.getLogger("polpo.cluster")

__all__ = ["ClusterError", "Membership"]


class ClusterError(StoreError):
    """This daemon cannot (or can no longer) take part in the cluster; the message says why."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Membership:
    def __init__(self, pool: Any, name: str, lease: float) -> None:
        self.pool = pool
        self.name = name
        self.lease = lease
        self.incarnation = uuid.uuid4().hex[:16]
        self.host = socket.gethostname()

    async def join(self) -> None:
        """Register this incarnation; refused while another live daemon uses the same node name."""
        async with self.pool.acquire() as c, c.transaction():
            row = await c.fetchrow(
                "SELECT host, pid, clock_timestamp() - heartbeat_at < make_interval(secs => $2) AS alive "
                "FROM nodes WHERE name = $1 FOR UPDATE", self.name, self.lease)
            if row is not None and row["alive"] and not (row["host"] == self.host and not _pid_alive(row["pid"])):
                raise ClusterError(
                    f"node name {self.name!r} is in use by a live daemon (pid {row['pid']} on {row['host']}); "
                    "give each daemon its own [daemon] node")
            await c.execute(
                "INSERT INTO nodes (name, incarnation, host, pid, started_at, heartbeat_at) "
                "VALUES ($1, $2, $3, $4, clock_timestamp(), clock_timestamp()) ON CONFLICT (name) DO UPDATE SET "
                "incarnation = excluded.incarnation, host = excluded.host, pid = excluded.pid, "
                "started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at",
                self.name, self.incarnation, self.host, os.getpid())

    async def run(self, on_lost: Callable[[str], None]) -> None:
        """Renew the heartbeat every lease/3. If it cannot be renewed within a lease, the others will take this
        node's work over: ``on_lost`` stops this daemon (its runs are killed) rather than run twice."""
        every = self.lease / 3
        last_ok = anyio.current_time()
        while True:
            await anyio.sleep(every)
            try:
                status = await self.pool.execute(
                    "UPDATE nodes SET heartbeat_at = clock_timestamp() WHERE name = $1 AND incarnation = $2",
                    self.name, self.incarnation)
            except Exception as e:  # the database is unreachable for now: try again until the lease runs out
                if anyio.current_time() - last_ok >= self.lease:
                    on_lost(f"no heartbeat for {self.lease:g} s (the lease): {type(e).__name__}: {e}")
                    return
                log.warning("heartbeat failed (%s); trying again", e)
                continue
            if status.endswith(" 0"):
                on_lost(f"another daemon registered as node {self.name!r}")
                return
            last_ok = anyio.current_time()

    async def leave(self) -> None:
        """A clean stop: the others see this node gone at once instead of after the lease."""
        await self.pool.execute("DELETE FROM nodes WHERE name = $1 AND incarnation = $2", self.name,
                                self.incarnation)
