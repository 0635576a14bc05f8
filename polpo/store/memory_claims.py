"""The cluster's claim queue in memory, with the rules of the PostgreSQL one (:mod:`.claims`), so cluster
semantics are unit-testable: several engines in one process share one :class:`MemoryDatabase` (procrastinate
fakes its job fetch the same way with its in-memory connector).

The rules, as PostgreSQL enforces them: a claim is exclusive (``FOR UPDATE SKIP LOCKED`` — here, one event
loop: a claim takes its candidates before anything else runs); an agent's and a mission's ``max_concurrency``
are counted over every node's held claims; an offer never takes a held claim back; only the holder (node and
incarnation) gives a claim back or drops it; a node is dead when it has no ``nodes`` entry of that incarnation
or its heartbeat is older than the lease, and a dead node's claim is taken over by one taker only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import anyio

from polpo.model.records import Attempt, Mission, Task
from polpo.store import claim_writes as W
from polpo.store import rows as R
from polpo.store.claim_records import Claim, DeadClaim, limit_keys, within_limits
from polpo.store.named_reads import GATES

__all__ = ["ClaimTable", "MemoryClaims"]

Rec = dict[str, Any]
_OFFER_COLS = W.OFFERS.cols


class ClaimTable:
    """The ``claims`` and ``nodes`` tables of a shared in-memory database."""

    def __init__(self, now: Callable[[], float]) -> None:
        self.now = now  # the database's clock (seconds, monotonic): heartbeats and leases
        self.rows: dict[str, Rec] = {}  # task id -> claim
        self.nodes: dict[str, tuple[str, float]] = {}  # node -> (incarnation, last heartbeat)
        self.listeners: list[Callable[[], None]] = []  # NOTIFY polpo_claims: a task was offered or given back
        self._claimable = False  # this batch made something claimable (told at its commit)

    def apply(self, table: R.Table, rows: Sequence[R.Row]) -> None:
        """A writer's batch rows for the claims (the statements of :mod:`polpo.store.claim_writes`); notes when
        something became claimable (an offer, a claim given back, or a held slot freed)."""
        offered = False
        for row in rows:
            if table is W.OFFERS:
                if row[0] not in self.rows:  # ON CONFLICT DO NOTHING: an offer never takes a held claim back
                    self.rows[row[0]] = {**dict(zip(_OFFER_COLS, row, strict=True)), "node": None,
                                         "incarnation": None, "stop": None}
                    offered = True
            elif table is W.STOPS:
                c = self.rows.get(row[0])
                if c is not None and c["node"] is not None:
                    c["stop"] = row[1]
            elif table is W.REQUEUES:
                offered |= self.end(*row, requeue=True)
            elif table is W.DROPS:  # a held slot freed: a claimer held back by a limit looks again
                offered |= self.end(*row, requeue=False)
            else:
                raise ValueError(f"not a claims statement: {table}")
        self._claimable |= offered

    def committed(self) -> None:
        if self._claimable:
            self._claimable = False
            self.notify()

    def end(self, task_id: str, node: str, incarnation: str, *, requeue: bool) -> bool:
        """Only the holder ends its claim; True when it did."""
        c = self.rows.get(task_id)
        if c is None or (c["node"], c["incarnation"]) != (node, incarnation):
            return False
        if requeue:
            c.update(node=None, incarnation=None, stop=None)
        else:
            del self.rows[task_id]
        return True

    def notify(self) -> None:
        for fn in list(self.listeners):
            fn()

    # -- membership -----------------------------------------------------------------------------------------
    def heartbeat(self, node: str, incarnation: str) -> None:
        self.nodes[node] = (incarnation, self.now())

    def leave(self, node: str) -> None:
        """A node gone (a clean stop, or its row removed): its claims are dead at once."""
        self.nodes.pop(node, None)

    def alive(self, node: str, incarnation: str, lease: float) -> bool:
        entry = self.nodes.get(node)
        return entry is not None and entry[0] == incarnation and self.now() - entry[1] <= lease


class SharedTables(Protocol):
    """The shared in-memory database (:class:`polpo.store.memory.MemoryDatabase`), as the queue reads it."""

    tables: dict[str, dict[tuple[Any, ...], Rec]]
    claims: ClaimTable

    def queue_command(self, kind: str, target: str) -> int: ...


class MemoryClaims:
    """One node's view of the in-memory claim queue: the interface of :class:`.claims.ClaimQueue`."""

    def __init__(self, db: SharedTables, node: str, incarnation: str, lease: float) -> None:
        self.store = db
        self.table = db.claims
        self.node = node
        self.incarnation = incarnation
        self.lease = lease
        self.skip: set[str] = set()  # missions whose tasks this node does not claim (their workspace is out of reach)

    def _held_count(self, key: str) -> int:
        kind, _, name = key.partition(":")
        field = "agent_key" if kind == "agent" else "mission_id"
        return sum(1 for c in self.table.rows.values() if c["node"] is not None and c[field] == name)

    async def claim(self, n: int) -> list[Claim]:
        """Up to ``n`` ready tasks this node may run now (home node, cluster-wide limits), claimed atomically."""
        free = [c for c in self.table.rows.values()
                if c["node"] is None and (c["home"] is None or c["home"] == self.node) and c["mission_id"] not in self.skip]
        free.sort(key=lambda c: (-c["prio"], c["mseq"], c["idx"]))
        rows = free[:n * 4]
        held = {k: self._held_count(k) for k in sorted({k for r in rows for k in limit_keys(r)})}
        taken: list[Claim] = []
        for i in within_limits(rows, held, n):
            r = rows[i]
            r.update(node=self.node, incarnation=self.incarnation, stop=None)
            taken.append(Claim(r["task_id"], r["mission_id"], self._task_row(r["task_id"]),
                               self._attempt_row(r["task_id"])))
        if len(taken) == n and len(rows) > n:
            self.table.notify()  # others may claim what this node left
        return taken

    def _task_row(self, task_id: str) -> Rec | None:
        row = self.store.tables["tasks"].get((task_id,))
        return None if row is None else dict(row)

    def _attempt_row(self, task_id: str) -> Rec | None:
        found = [a for a in self.store.tables["attempts"].values() if a["task_id"] == task_id]
        return dict(max(found, key=lambda a: a["number"])) if found else None

    def end_row(self, task_id: str) -> R.Row:
        return (task_id, self.node, self.incarnation)

    async def end(self, task_id: str, *, requeue: bool) -> None:
        if self.table.end(task_id, self.node, self.incarnation, requeue=requeue) and requeue:
            self.table.notify()

    async def hold(self, row: R.Row) -> bool:
        if row[0] in self.table.rows:
            return False
        self.table.rows[row[0]] = {**dict(zip(_OFFER_COLS, row, strict=True)), "node": self.node,
                                   "incarnation": self.incarnation, "stop": None}
        return True

    async def seize(self, task_ids: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for tid in task_ids:
            c = self.table.rows.get(tid)
            if c is None:
                continue
            if c["node"] is None:
                del self.table.rows[tid]
            elif (c["node"], c["incarnation"]) != (self.node, self.incarnation):
                out[tid] = c["node"]
        return out

    async def dead(self) -> list[DeadClaim]:
        return [DeadClaim(c["task_id"], c["node"], c["incarnation"], c["stop"]) for c in self.table.rows.values()
                if c["node"] is not None and not (c["node"] == self.node and c["incarnation"] == self.incarnation)
                and not self.table.alive(c["node"], c["incarnation"], self.lease)]

    async def take_over(self, dead: DeadClaim) -> bool:
        c = self.table.rows.get(dead.task_id)
        if c is None or (c["node"], c["incarnation"]) != (dead.node, dead.incarnation):
            return False  # another taker won, or the holder ended it
        c.update(node=self.node, incarnation=self.incarnation)
        return True

    async def held(self) -> set[str]:
        return {c["task_id"] for c in self.table.rows.values()
                if (c["node"], c["incarnation"]) == (self.node, self.incarnation)}

    async def fresh_tasks(self, m: Mission, task_ids: Sequence[str]) -> dict[str, tuple[Task, Attempt | None]]:
        out: dict[str, tuple[Task, Attempt | None]] = {}
        for tid in task_ids:
            row = self._task_row(tid)
            if row is not None:
                a = self._attempt_row(tid)
                out[tid] = (R.task_from_row(row, m), None if a is None else R.attempt_from_row(a))
        return out

    async def mission_gates(self, mission_id: str) -> dict[str, str]:
        return {g["name"]: g["status"] for g in GATES.apply(self.store.tables["gates"].values(), (mission_id,))}

    async def relay(self, kind: str, target: str, *, wait: float = 10.0) -> tuple[str, str]:
        """Queued in the shared command inbox for the leader, and the answer awaited (as on PostgreSQL)."""
        cid = self.store.queue_command(kind, target)
        with anyio.move_on_after(wait):
            while True:
                row = self.store.tables["commands"][(cid,)]
                if row["status"] != "queued":
                    return str(row["status"]), str(row["result"])
                await anyio.sleep(0.01)
        return "done", f"queued {kind} {target}; the leader has not applied it yet"
