"""The cluster's queue of ready tasks: one row per task in ``claims``; a node claims rows with
``FOR UPDATE SKIP LOCKED`` (so nodes never wait on each other's candidates) and holds a claim for a task's whole
turn (its attempt and assessment), which makes the holder the only writer of that task's row.

The leader offers a task when it becomes ready (an insert in the same transaction as the state that made it
ready, :data:`polpo.store.claim_writes.OFFERS`); the holder gives the claim back at the end of the turn (the task is
ready again: a fix, a retry, a shutdown) or drops it (done, failed, waiting for a person). Limits across the
cluster: an agent's and a mission's ``max_concurrency`` are counted over every node's held claims, under
transaction-level advisory locks taken in one order (no deadlock); ``[daemon] max_concurrency`` is per node.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

from polpo.model.records import Attempt, Mission, Task
from polpo.store import claim_writes as W
from polpo.store import rows as R
from polpo.store.claim_records import Claim, DeadClaim, limit_keys, within_limits
from polpo.store.claim_writes import CLAIMS_CHANNEL
from polpo.store.cluster.relay import relay_command
from polpo.store.cluster.timing import TAKE_AFTER
from polpo.store.fencing import Fence, fenced_transaction
from polpo.store.named_reads import GATES
from polpo.store.sql import statement

__all__ = ["Claim", "ClaimQueue", "DeadClaim"]

_CANDIDATES = ("SELECT task_id, mission_id, agent_key, agent_limit, mission_limit FROM claims "
               "WHERE node IS NULL AND (home IS NULL OR home = $1) AND NOT (mission_id = ANY($3::text[])) "
               "ORDER BY prio DESC, mseq, idx LIMIT $2 FOR UPDATE SKIP LOCKED")
_HELD_AGENT = "SELECT count(*) FROM claims WHERE node IS NOT NULL AND agent_key = $1"
_HELD_MISSION = "SELECT count(*) FROM claims WHERE node IS NOT NULL AND mission_id = $1"
_TAKE = ("UPDATE claims SET node = $1, incarnation = $2, claimed_at = clock_timestamp(), stop = NULL "
         "WHERE task_id = ANY($3::text[])")
_LATEST_ATTEMPTS = ("SELECT DISTINCT ON (task_id) * FROM attempts WHERE task_id = ANY($1::text[]) "
                    "ORDER BY task_id, number DESC")
_DEAD = ("SELECT c.task_id, c.node, c.incarnation, c.stop FROM claims c LEFT JOIN nodes n "
         "ON n.name = c.node AND n.incarnation = c.incarnation WHERE c.node IS NOT NULL "
         "AND (n.name IS NULL OR clock_timestamp() - n.heartbeat_at > make_interval(secs => $1))")
# the dead node's row, locked (waiting for its batches in flight) and fenced: its incarnation is never valid again
_FENCE_NODE = ("UPDATE nodes SET incarnation = incarnation || '/fenced' WHERE name = $1 AND incarnation = $2 "
               "AND clock_timestamp() - heartbeat_at > make_interval(secs => $3)")
_LIVE_NODE = "SELECT 1 FROM nodes WHERE name = $1 AND incarnation = $2 FOR UPDATE"


def _lock_key(key: str) -> int:
    return zlib.crc32(key.encode()) - 2**31  # a stable int4 for pg_advisory_xact_lock


class ClaimQueue:
    def __init__(self, pool: Any, node: str, incarnation: str, lease: float, fence: Fence | None = None) -> None:
        self.pool = pool
        self.node = node
        self.incarnation = incarnation
        self.lease = lease
        self.fence = fence  # a daemon's: each of its transactions here goes on only while it holds its lease
        self.skip: set[str] = set()  # missions whose tasks this node does not claim (their workspace is out of reach)

    async def claim(self, n: int) -> list[Claim]:
        """Up to ``n`` ready tasks this node may run now (home node, cluster-wide limits), claimed atomically."""
        async with self.pool.acquire() as c, fenced_transaction(c, self.fence):
            rows = await c.fetch(_CANDIDATES, self.node, n * 4, sorted(self.skip))
            if not rows:
                return []
            keys = sorted({k for r in rows for k in limit_keys(r)})
            held: dict[str, int] = {}
            for key in keys:  # one order on every node: two claimers never wait on each other in a cycle
                await c.execute("SELECT pg_advisory_xact_lock($1)", _lock_key(key))
                kind, _, name = key.partition(":")
                held[key] = int(await c.fetchval(_HELD_AGENT if kind == "agent" else _HELD_MISSION, name))
            taken = [Claim(rows[i]["task_id"], rows[i]["mission_id"]) for i in within_limits(rows, held, n)]
            if taken:
                ids = [t.task_id for t in taken]
                await c.execute(_TAKE, self.node, self.incarnation, ids)
                trows = {r["id"]: r for r in await c.fetch("SELECT * FROM tasks WHERE id = ANY($1::text[])", ids)}
                arows = {a["task_id"]: a for a in await c.fetch(_LATEST_ATTEMPTS, ids)}
                taken = [Claim(t.task_id, t.mission_id, trows.get(t.task_id), arows.get(t.task_id)) for t in taken]
            if len(taken) == n and len(rows) > n:
                # this transaction locked candidates it did not take: a node that skipped them meanwhile found
                # nothing and went back to sleep; wake it (at the commit) to look again
                await c.execute("SELECT pg_notify($1, '')", CLAIMS_CHANNEL)
            return taken

    def end_row(self, task_id: str) -> R.Row:
        """The row of :func:`polpo.store.claim_writes.end`: written in the same transaction as (or one after) the
        turn's last state, so the claim never ends before that state is durable."""
        return (task_id, self.node, self.incarnation)

    async def end(self, task_id: str, *, requeue: bool) -> None:
        """The end of this node's turn on a task, at once: give it back to the queue, or drop it."""
        sql, params = statement(W.REQUEUES if requeue else W.DROPS, [self.end_row(task_id)], "$")
        async with self.pool.acquire() as c, fenced_transaction(c, self.fence):
            status = await c.execute(sql, *params[0])
            if requeue and status.endswith(" 1"):
                await c.execute("SELECT pg_notify($1, '')", CLAIMS_CHANNEL)

    async def hold(self, row: R.Row) -> bool:
        """Claim a task that has no claim row (recorded as running before this database had claims)."""
        async with self.pool.acquire() as c, fenced_transaction(c, self.fence):
            status = await c.execute(
                "INSERT INTO claims (task_id, mission_id, home, prio, mseq, idx, agent_key, agent_limit, "
                "mission_limit, node, incarnation, claimed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
                "clock_timestamp()) ON CONFLICT (task_id) DO NOTHING", *row, self.node, self.incarnation)
        return bool(status.endswith(" 1"))

    async def seize(self, task_ids: Sequence[str]) -> dict[str, str]:
        """Before the leader changes tasks it does not run itself: unclaimed offers are withdrawn (the leader is
        then their only writer); returns the tasks another node holds (task id -> node) — ask those to stop."""
        async with self.pool.acquire() as c, fenced_transaction(c, self.fence):
            await c.execute("DELETE FROM claims WHERE task_id = ANY($1::text[]) AND node IS NULL", list(task_ids))
            rows = await c.fetch("SELECT task_id, node FROM claims WHERE task_id = ANY($1::text[]) "
                                 "AND node IS NOT NULL AND NOT (node = $2 AND incarnation = $3)",
                                 list(task_ids), self.node, self.incarnation)
        return {r["task_id"]: r["node"] for r in rows}

    async def dead(self) -> list[DeadClaim]:
        """Claims of nodes whose lease ran out a margin ago (``TAKE_AFTER``: their guards have killed their agents
        by then), or of an earlier life of a node, or of one that was fenced."""
        rows = await self.pool.fetch(_DEAD, self.lease * TAKE_AFTER)
        return [DeadClaim(r["task_id"], r["node"], r["incarnation"], r["stop"]) for r in rows
                if not (r["node"] == self.node and r["incarnation"] == self.incarnation)]

    async def take_over(self, dead: DeadClaim) -> bool:
        """Hold a dead node's claim (only one taker wins); the caller then recovers the task and ends the claim.

        In the same transaction the dead incarnation is fenced first: its row is locked (so a batch of it still in
        flight commits before, never after) and its incarnation changed, so none of its later writes or heartbeats
        can succeed. A node that renewed its lease meanwhile keeps it, and its claim."""
        async with self.pool.acquire() as c, fenced_transaction(c, self.fence):
            if await c.fetchval(_LIVE_NODE, dead.node, dead.incarnation) is not None:
                status = await c.execute(_FENCE_NODE, dead.node, dead.incarnation, self.lease * TAKE_AFTER)
                if status.endswith(" 0"):
                    return False  # it renewed its lease after it was seen dead
            status = await c.execute(
                "UPDATE claims SET node = $1, incarnation = $2, claimed_at = clock_timestamp() "
                "WHERE task_id = $3 AND node = $4 AND incarnation = $5", self.node, self.incarnation, dead.task_id,
                dead.node, dead.incarnation)
        return bool(status.endswith(" 1"))

    async def held(self) -> set[str]:
        """The tasks this incarnation holds claims on (to find a claim whose commit's answer was lost)."""
        rows = await self.pool.fetch("SELECT task_id FROM claims WHERE node = $1 AND incarnation = $2", self.node,
                                     self.incarnation)
        return {r["task_id"] for r in rows}

    async def fresh_tasks(self, m: Mission, task_ids: Sequence[str]) -> dict[str, tuple[Task, Attempt | None]]:
        """The stored state of some tasks of ``m`` and their latest attempts (another node may have changed them)."""
        async with self.pool.acquire() as c:
            trows = await c.fetch("SELECT * FROM tasks WHERE id = ANY($1::text[])", list(task_ids))
            arows = await c.fetch(_LATEST_ATTEMPTS, list(task_ids))
        attempts = {a["task_id"]: R.attempt_from_row(a) for a in arows}
        return {r["id"]: (R.task_from_row(r, m), attempts.get(r["id"])) for r in trows}

    async def relay(self, kind: str, target: str) -> tuple[str, str]:
        """A command given to a node that does not lead, queued for the leader (:mod:`.relay`)."""
        return await relay_command(self.pool, kind, target)

    async def mission_gates(self, mission_id: str) -> dict[str, str]:
        rows = await self.pool.fetch(GATES.sql("$"), mission_id)
        return {r["name"]: r["status"] for r in rows}
