"""The leader: the one node that accepts mission files and coordinates missions (dependencies, gates, completion,
SLA, commands).

Leadership is a term held by a live incarnation, on the database's clock: the one ``leader`` row names a node, its
incarnation and the term's number, and the term lasts while that incarnation holds its lease (its heartbeat,
:mod:`.membership`). No connection holds it. A session lock did before, and PostgreSQL keeps a session as long as
TCP does: a leader cut off by a half-open network (a dead NAT, a cut cable, a migrated VM: no FIN, no RST) kept
the lock for hours, and no other node could lead. Now a cut leader's lease runs out on the server's clock like any
node's, its own clock stops it before that (:mod:`.timing`), and another node is elected.

Every node reads the row every ``TRY_EVERY`` seconds (at most a sixth of the lease). A follower that finds the
term vacant — its incarnation holds no lease: it ran out, the node left, or it started again as another — takes
the row, in a fenced transaction that first takes the leader-writes lock exclusively: a previous leader's writes
still in flight hold it shared (:data:`~polpo.store.fencing.FENCE_FUNCTION`) and commit before the new term
begins; the ones that come after find the row changed (``PLF02``). The new term's number is the fence's: every
write of the leader checks that the row still names it, in that term.

A leader that finds the row naming another term is deposed (``on_deposed``: it decides nothing more at once) and
competes again without exiting; its own turns go on under its lease. While its lease holds, only a person's hand
on the row can do that; a write refused for the leadership alone (``PLF02``) deposes it the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from polpo.store.cluster.timing import RENEW, SELF_STOP
from polpo.store.fencing import LEADER_WRITES_KEY, Fence, fenced_transaction, session_settings
from polpo.store.identity import StoreLost
from polpo.store.outage_wait import OutageWait
from polpo.store.postgres_conn import PgTarget

log = logging.getLogger("polpo.cluster")

__all__ = ["Leadership"]

TRY_EVERY = 1.0  # seconds between two readings of the leader's row (at most a sixth of the lease)

_LIVE = ("SELECT 1 FROM nodes n WHERE n.name = l.node AND n.incarnation = l.incarnation "
         "AND clock_timestamp() - n.heartbeat_at < make_interval(secs => $1)")
_READ = f"SELECT l.node, l.incarnation, l.term, NOT EXISTS ({_LIVE}) AS vacant FROM leader l"
_ELECT = (f"UPDATE leader l SET node = $2, incarnation = $3, term = l.term + 1, since = clock_timestamp() "
          f"WHERE l.term = $4 AND NOT EXISTS ({_LIVE}) RETURNING l.term")


class Leadership:
    def __init__(self, target: PgTarget, node: str, incarnation: str, lease: float, fence: Fence | None = None
                 ) -> None:
        self.target = target
        self.node = node
        self.incarnation = incarnation
        self.lease = lease
        self.term: int | None = None  # this node's term while it leads
        self.fence = fence  # once leading, every write of this node also checks that its term still holds
        self.every = min(TRY_EVERY, lease * RENEW)
        self._announced = False  # on_elected has been called for this term

    @property
    def leader(self) -> bool:
        return self.term is not None

    async def run(self, on_elected: Callable[[], Awaitable[None]],
                  on_deposed: Callable[[str], Awaitable[None]]) -> None:
        """Read the leader's row every ``every`` seconds: take a vacant term, step down from one that ended."""
        wait = OutageWait("the leadership election", log)
        conn: Any = None
        while True:
            try:
                if conn is None:
                    conn = await self._connect()
                with anyio.fail_after(self.lease * SELF_STOP):  # a connection that stopped answering is dropped
                    ended = await self._look(conn)
                wait.ok()
            except StoreLost:  # this node was fenced: it is leaving
                await _drop(conn)
                return
            except Exception as e:  # an outage, or another refusal that may pass too (a password being fixed)
                await _drop(conn)
                conn = None
                delay = wait.failed(e)
                if delay is None:
                    log.warning("cannot read the leader's row (%s: %s); trying again", type(e).__name__, e)
                await anyio.sleep(self.every * 5 if delay is None else delay)
                continue
            if ended is not None:
                await self._step_down(ended, on_deposed)
            elif self.term is not None and not self._announced:
                self._announced = True
                try:
                    await on_elected()
                except Exception as e:  # the election's loading failed (an outage): step down, try again
                    log.warning("could not take up leadership (%s: %s); trying again", type(e).__name__, e)
                    await self._step_down(f"{type(e).__name__}: {e}", on_deposed)
            await anyio.sleep(self.every)

    async def _look(self, conn: Any) -> str | None:
        """One reading of the row (and an election when the term is vacant); why this node's term ended, if so."""
        if self.term is not None and self.fence is not None and self.fence.leader_term != self.term:
            return "the database refused its write as the leader: its term has ended"
        row = await conn.fetchrow(_READ, self.lease)
        mine = row["node"] == self.node and row["incarnation"] == self.incarnation
        if self.term is not None:
            return None if mine and row["term"] == self.term else (
                f"the leader's row names {row['node'] or 'nobody'} in term {row['term']}")
        if mine:  # this node's own election, whose commit's answer was lost: its term, as the database has it
            self._elected(int(row["term"]))
        elif row["vacant"]:
            async with fenced_transaction(conn, self.fence):
                await conn.execute("SELECT pg_advisory_xact_lock($1)", LEADER_WRITES_KEY)
                term = await conn.fetchval(_ELECT, self.lease, self.node, self.incarnation, row["term"])
            if term is not None:
                self._elected(int(term))
        return None

    def _elected(self, term: int) -> None:
        self.term = term
        self._announced = False
        if self.fence is not None:  # from now on this node writes as the leader only while this term holds
            self.fence.leader_term = term
        log.info("elected the leader (term %d)", term)

    async def _step_down(self, reason: str, on_deposed: Callable[[str], Awaitable[None]]) -> None:
        self.term = None
        log.warning("no longer the leader: %s; competing again", reason)
        await on_deposed(reason)
        await anyio.sleep(self.every)

    async def _connect(self) -> Any:
        import asyncpg  # the optional PostgreSQL extra; imported only by daemons that use it

        return await asyncpg.connect(self.target.url, password=self.target.password, timeout=self.lease,
                                     server_settings=session_settings(self.lease))


async def _drop(conn: Any) -> None:
    if conn is not None:
        with anyio.CancelScope(shield=True):
            try:
                await conn.close(timeout=1)
            except Exception:
                conn.terminate()
