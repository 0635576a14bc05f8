"""An in-memory store: the same protocol and the same writer as SQLite, with tables as dictionaries.

For fast unit tests of the engine, the runner and recovery: a test can commit through it, read what a crash
would leave behind, and drive the engine without a file. Rows are kept as dictionaries of the same columns as
the SQL tables, converted by the same functions, so a store-level test runs unchanged against both backends.
Nothing survives the process.

Several daemons on one database: stores made on one :class:`MemoryDatabase` share its tables, its event
numbering (commit order across nodes, as PostgreSQL's one-row clock) and its claim queue
(:mod:`polpo.store.memory_claims`); each store's ``on_remote`` gets the other stores' events after their
commit (the follower's job on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from polpo.clock import Clock, iso
from polpo.events.catalog import Event
from polpo.store import rows as R
from polpo.store.core import StoreCore
from polpo.store.fencing import Deposed
from polpo.store.memory_claims import ClaimTable
from polpo.store.named_reads import NamedReads, Select
from polpo.store.prune import MemoryPruning
from polpo.store.spend_writes import ADDS, SpendTable

__all__ = ["MemoryDatabase", "MemoryStore"]

Rec = dict[str, Any]


class TableOwner(Protocol):
    """What keeps, in memory, a table whose statements live with the module that owns it (``Table.write``: the
    cluster's claims, the budgets' spend); the store hands it that table's rows of each batch."""

    def apply(self, table: R.Table, rows: Sequence[R.Row]) -> None: ...

    def committed(self) -> None:
        """After the batch's events were handed on (PostgreSQL's NOTIFY is delivered at the commit)."""


@dataclass
class MemoryDatabase:
    """What several in-memory stores share, as daemons share one PostgreSQL database."""

    clock: Clock
    tables: dict[str, dict[tuple[Any, ...], Rec]] = field(
        default_factory=lambda: {t.name: {} for t in (*R.UPSERT_TABLES, R.COMMANDS_DONE, ADDS)})
    events: list[Event] = field(default_factory=list)
    stores: list[MemoryStore] = field(default_factory=list)
    next_command: int = 0
    leader: str | None = None  # the node the leader's row names (PostgreSQL's ``leader`` table)
    claims: ClaimTable = field(init=False)
    owners: dict[str, TableOwner] = field(init=False)  # table name -> what applies its rows

    def __post_init__(self) -> None:
        self.claims = ClaimTable(self.clock.monotonic)
        self.owners = {"claims": self.claims, "spend": SpendTable(self.tables["spend"])}

    def queue_command(self, kind: str, target: str) -> int:
        """Queue a retry / cancel / approve as the CLI would."""
        self.next_command += 1
        cid = self.next_command
        self.tables["commands"][(cid,)] = {
            "id": cid, "kind": kind, "target": target, "created_at": iso(self.clock.now()),
            "status": "queued", "result": None, "handled_at": None}
        return cid


class MemoryStore(NamedReads, MemoryPruning, StoreCore):
    def __init__(self, clock: Clock, db: MemoryDatabase | None = None) -> None:
        self.db = db or MemoryDatabase(clock)
        super().__init__(clock, len(self.db.events))
        self.tables = self.db.tables
        self.events = self.db.events
        self.db.stores.append(self)
        self.on_remote: Callable[[list[Event]], None] | None = None  # other stores' events, after their commit

    async def _apply(self, rows: dict[R.Table, list[R.Row]], events: list[Event]) -> Sequence[int] | None:
        if self.term and self.db.leader != self.node:  # as polpo_fence's PLF02: the term ended, the lease holds
            raise Deposed(f"node {self.node} no longer leads")
        for table, group in rows.items():  # validated first, applied after: all or nothing
            for row in group:
                if len(row) != len(table.cols):
                    raise ValueError(f"{table.name}: row of {len(row)} values for {len(table.cols)} columns")
        owners: list[TableOwner] = []
        for table, group in rows.items():
            if table.write is not None:  # a table another module owns
                owner = self.db.owners[table.name]
                owner.apply(table, group)
                if owner not in owners:
                    owners.append(owner)
                continue
            target = self.tables[table.name]
            for row in group:
                rec = dict(zip(table.cols, row, strict=True))
                key = tuple(rec[k] for k in table.key)
                old = target.get(key)
                if table is R.COMMANDS_DONE:
                    if old is not None:
                        old.update(rec)
                elif old is None:
                    target[key] = rec
                else:
                    old.update({c: v for c, v in rec.items() if c not in table.insert_only})
        first = len(self.events) + 1  # numbered in the database, in commit order across its stores
        seqs = list(range(first, first + len(events)))
        renumbered = bool(events) and events[0].seq != first  # another store committed since this one stamped
        if renumbered:
            events = [replace(ev, seq=n) for ev, n in zip(events, seqs, strict=True)]
        self.events.extend(events)
        for other in self.db.stores:
            if other is not self and other.on_remote is not None and events:
                other.on_remote(events)
        for owner in owners:
            owner.committed()
        return seqs if renumbered else None

    async def _close_backend(self) -> None:
        return None

    async def reclaim(self, pages: int) -> int:
        return 0

    # -- what the CLI does on SQLite ---------------------------------------------------------------------------
    def queue_command(self, kind: str, target: str) -> int:
        """Queue a retry / cancel / approve as the CLI would."""
        return self.db.queue_command(kind, target)

    def rows(self, table: str, where: Callable[[Rec], bool] = lambda _: True) -> list[Rec]:
        """The stored rows of ``table`` that ``where`` accepts (tests read the state through this)."""
        return [dict(r) for r in self.tables[table].values() if where(r)]

    # -- named reads (polpo.store.named_reads: the same reads as the SQL backends, over the dictionaries) --------
    async def _select(self, q: Select, *args: Any) -> list[Mapping[str, Any]]:
        return q.apply(self.tables[q.table].values(), args)

    async def events_after(self, seq: int, limit: int | None = None) -> list[Event]:
        after = [ev for ev in self.events if ev.seq > seq]
        return after if limit is None else after[:limit]
