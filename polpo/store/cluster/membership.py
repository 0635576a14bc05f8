"""A node's membership: its row in ``nodes``, renewed by a heartbeat; a node whose heartbeat is older than the
lease may no longer write (:mod:`polpo.store.fencing`), and once a margin more has passed the leader takes over
its claims (:mod:`.timing`). A lease that ran out is never renewed: the node leaves and starts again.

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

from polpo.store.cluster.timing import RENEW, SELF_STOP, must_stop, now
from polpo.store.errors import StoreError
from polpo.store.fencing import session_settings
from polpo.store.postgres_conn import PgTarget
from polpo.tools.procscan import pid_alive

log = logging.getLogger("polpo.cluster")

__all__ = ["ClusterError", "Membership"]


# the heartbeat: only this incarnation, only while the database still grants its lease (an expired lease is final)
_RENEW = ("UPDATE nodes SET heartbeat_at = clock_timestamp() WHERE name = $1 AND incarnation = $2 "
          "AND clock_timestamp() - heartbeat_at < make_interval(secs => $3)")


class ClusterError(StoreError):
    """This daemon cannot (or can no longer) take part in the cluster; the message says why."""


class _PoolConn:
    """The pool as a connection (tests build a Membership without a target of its own)."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool

    async def execute(self, sql: str, *args: Any) -> str:
        return str(await self.pool.execute(sql, *args))

    async def close(self, timeout: float) -> None:  # noqa: ASYNC109 - the asyncpg signature
        return None

    def terminate(self) -> None:
        return None


class Membership:
    def __init__(self, pool: Any, name: str, lease: float, target: PgTarget | None = None) -> None:
        self.pool = pool
        self.target = target  # heartbeats on a connection of their own: never queued behind the writer's
        self.name = name
        self.lease = lease
        self.incarnation = uuid.uuid4().hex[:16]
        self.host = socket.gethostname()
        self.renewed = now()  # when the last heartbeat that succeeded was sent (timing.now)
        self.beat: Callable[[], None] | None = None  # the guard's beat, while this node may act on its lease
        self.beaten = now()  # when the watch last beat (the guard, if any)
        self.watching = False  # until run(): before it no agent runs and the database's fence alone decides
        self.stopped: str | None = None
        self._running: anyio.CancelScope | None = None  # run()'s renewals and watch, ended by leave()

    async def join(self) -> None:
        """Register this incarnation; refused while another live daemon uses the same node name."""
        sent = now()
        async with self.pool.acquire() as c, c.transaction():
            row = await c.fetchrow(
                "SELECT host, pid, clock_timestamp() - heartbeat_at < make_interval(secs => $2) AS alive "
                "FROM nodes WHERE name = $1 FOR UPDATE", self.name, self.lease)
            if row is not None and row["alive"] and not (row["host"] == self.host and not pid_alive(row["pid"])):
                raise ClusterError(
                    f"node name {self.name!r} is in use by a live daemon (pid {row['pid']} on {row['host']}); "
                    "give each daemon its own [daemon] node")
            await c.execute(
                "INSERT INTO nodes (name, incarnation, host, pid, started_at, heartbeat_at) "
                "VALUES ($1, $2, $3, $4, clock_timestamp(), clock_timestamp()) ON CONFLICT (name) DO UPDATE SET "
                "incarnation = excluded.incarnation, host = excluded.host, pid = excluded.pid, "
                "started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at",
                self.name, self.incarnation, self.host, os.getpid())
        self.renewed = sent

    def why_not(self) -> str | None:
        """By this node's own clock, once it runs (:meth:`run`): why it may no longer act (start an agent, write),
        or None. Once a reason is given it stays (the node leaves)."""
        if self.stopped is None and self.watching:
            self.stopped = must_stop(self.renewed, self.beaten, now(), self.lease)
        return self.stopped

    def fresh(self) -> bool:
        return self.why_not() is None

    async def run(self, on_lost: Callable[[str], None]) -> None:
        """Renew the heartbeat every ``RENEW`` of the lease and watch the renewals by this node's own clock. When
        none succeeded for ``SELF_STOP`` of the lease, or the database no longer grants it (a taker fenced this
        incarnation, or it ran out), ``on_lost`` stops this daemon (its runs are killed) before anyone takes over."""
        async with anyio.create_task_group() as tg:
            self._running = tg.cancel_scope
            tg.start_soon(self._renew, on_lost, tg.cancel_scope)
            tg.start_soon(self._watch, on_lost, tg.cancel_scope)

    async def _renew(self, on_lost: Callable[[str], None], scope: anyio.CancelScope) -> None:
        conn: Any = None
        while True:
            sent = now()
            try:
                if conn is None:
                    conn = await self._connect()
                with anyio.fail_after(self.lease * SELF_STOP):
                    status = await conn.execute(_RENEW, self.name, self.incarnation, self.lease)
            except Exception as e:  # the database is unreachable for now: the watch decides how long is too long
                log.warning("heartbeat failed (%s: %s); trying again", type(e).__name__, e)
                await self._drop(conn)
                conn = None
            else:
                if status.endswith(" 0"):
                    await self._drop(conn)
                    on_lost(f"node {self.name!r} no longer holds its lease (it ran out, or another node took its "
                            "tasks over or registered under its name)")
                    scope.cancel()
                    return
                self.renewed = max(self.renewed, sent)
            await anyio.sleep(max(0.0, sent + self.lease * RENEW - now()))

    async def _watch(self, on_lost: Callable[[str], None], scope: anyio.CancelScope) -> None:
        """Never waits for the database: stops this node by its own clock, and beats the guard while it may act."""
        self.beaten = now()
        self.watching = True
        while True:
            if (why := self.why_not()) is not None:
                on_lost(why)
                scope.cancel()
                return
            self.beaten = now()  # (after the check: a gap the guard may have acted on is never beaten over)
            if self.beat is not None:
                self.beat()
            await anyio.sleep(self.lease * RENEW / 2)

    async def _connect(self) -> Any:
        if self.target is None:
            return _PoolConn(self.pool)
        import asyncpg

        return await asyncpg.connect(self.target.url, password=self.target.password, timeout=self.lease,
                                     server_settings=session_settings(self.lease))

    @staticmethod
    async def _drop(conn: Any) -> None:
        if conn is not None:
            with anyio.CancelScope(shield=True):
                try:
                    await conn.close(timeout=1)
                except Exception:
                    conn.terminate()

    async def leave(self) -> None:
        """A clean stop: the others see this node gone at once instead of after the lease. The renewals end first:
        one that found the row gone would take the leave for a lost lease, and the clean stop would exit 1 (nemesis
        seed 8160)."""
        if self._running is not None:
            self._running.cancel()
        await self.pool.execute("DELETE FROM nodes WHERE name = $1 AND incarnation = $2", self.name,
                                self.incarnation)
