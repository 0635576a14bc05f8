"""The leader: the one node that accepts mission files and coordinates missions (dependencies, gates, completion,
SLA, commands). It holds a session advisory lock on a connection of its own; PostgreSQL releases the lock when
that connection ends — the process died, was killed, or lost the network — and another node takes it within a
second or two. A leader that loses its connection steps down at once (``on_deposed``: it cannot know whether
another node already leads, so it decides nothing more) and competes for the lock again, without exiting: a
PostgreSQL restart or a dropped connection costs a new election, not the node. While it leads, its writes are
fenced on that lock too (:mod:`polpo.store.fencing`); a write refused for the lock alone deposes the node
instead of stopping it (its lease still holds: its own turns go on).

A leader paused with its connection open keeps the lock (PostgreSQL cannot tell a frozen process from a slow one):
its missions wait, nothing runs twice. TCP keepalives or ``idle_session_timeout`` on the server bound that wait.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from polpo.store.fencing import LEADER_KEY, LEADER_WRITES_KEY, Fence
from polpo.store.outage_wait import OutageWait
from polpo.store.postgres_conn import PgTarget

log = logging.getLogger("polpo.cluster")

__all__ = ["LEADER_KEY", "Leadership"]

TRY_EVERY = 1.0  # seconds between two attempts of a follower to become the leader


class Leadership:
    def __init__(self, target: PgTarget, lease: float, fence: Fence | None = None) -> None:
        self.target = target
        self.lease = lease
        self.leader = False
        self.fence = fence  # once leading, every write of this node also checks that this lock is still held

    async def run(self, on_elected: Callable[[], Awaitable[None]],
                   on_deposed: Callable[[str], Awaitable[None]]) -> None:
        """Wait to be the leader (reconnecting as needed), lead until the lock's connection is lost, step down,
        and wait again."""
        wait = OutageWait("the leadership election", log)
        while True:
            try:
                conn = await self._connect()
                wait.ok()
            except Exception as e:  # an outage, or another refusal that may pass too (a password being fixed)
                delay = wait.failed(e)
                if delay is None:
                    log.warning("cannot connect to wait for leadership (%s); trying again", e)
                await anyio.sleep(TRY_EVERY * 5 if delay is None else delay)
                continue
            try:
                await self._lead(conn, on_elected)
                reason = "the leader's database connection was lost"
            except Exception as e:  # the waiting connection was lost, or the election's loading failed with it
                reason = f"{type(e).__name__}: {e}"
                if not self.leader:
                    log.warning("lost the connection that waits for leadership (%s); reconnecting", e)
            finally:
                with anyio.CancelScope(shield=True):
                    try:
                        await conn.close(timeout=2)
                    except Exception:
                        conn.terminate()
            if self.leader:
                self.leader = False
                log.warning("no longer the leader: %s; competing for the lock again", reason)
                await on_deposed(reason)
                await anyio.sleep(TRY_EVERY)

    async def _connect(self) -> Any:
        import asyncpg  # the optional PostgreSQL extra; imported only by daemons that use it

        return await asyncpg.connect(self.target.url, password=self.target.password, timeout=15)

    async def _lead(self, conn: Any, on_elected: Callable[[], Awaitable[None]]) -> None:
        """Returns once the leader's connection is gone (leadership lost); raises while still a follower."""
        lost = anyio.Event()
        conn.add_termination_listener(lambda _c: lost.set())
        while not await conn.fetchval("SELECT pg_try_advisory_lock($1)", LEADER_KEY):
            with anyio.move_on_after(TRY_EVERY):
                await lost.wait()
            if lost.is_set():
                raise OSError("connection closed")
        if self.fence is not None:  # from now on this node writes only while this connection holds the lock
            self.fence.leader_pid = conn.get_server_pid()
        # a previous leader's writes still in flight (checked before its lock went) commit before this one leads
        await conn.execute("SELECT pg_advisory_lock($1), pg_advisory_unlock($1)", LEADER_WRITES_KEY)
        self.leader = True
        await on_elected()
        while not lost.is_set():  # a dead connection is noticed within a third of the lease
            with anyio.move_on_after(self.lease / 3):
                await lost.wait()
            if lost.is_set():
                break
            try:
                with anyio.fail_after(self.lease / 3):
                    await conn.fetchval("SELECT 1")
            except Exception:
                break
