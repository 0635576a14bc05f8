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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from polpo.clock import Clock, iso
from polpo.events.catalog import Event
from polpo.model.records import Assessment
from polpo.model.schedule import Schedule
from polpo.model.status import GateStatus, SourceOutcome
from polpo.store import rows as R
from polpo.store.core import StoreCore
from polpo.store.memory_claims import ClaimTable
from polpo.store.protocol import CommandRecord, LoadedMission, MissionIndexEntry, SourceRecord

__all__ = ["MemoryDatabase", "MemoryStore"]

Rec = dict[str, Any]
_CLAIM_TABLES = (R.CLAIM_OFFERS, R.CLAIM_STOPS, R.CLAIM_REQUEUES, R.CLAIM_DROPS)


@dataclass
class MemoryDatabase:
    """What several in-memory stores share, as daemons share one PostgreSQL database."""

    clock: Clock
    tables: dict[str, dict[tuple[Any, ...], Rec]] = field(
        default_factory=lambda: {t.name: {} for t in (*R.UPSERT_TABLES, R.COMMANDS_DONE)})
    events: list[Event] = field(default_factory=list)
    stores: list[MemoryStore] = field(default_factory=list)
    next_command: int = 0
    claims: ClaimTable = field(init=False)

    def __post_init__(self) -> None:
        self.claims = ClaimTable(self.clock.monotonic)

    def queue_command(self, kind: str, target: str) -> int:
        """Queue a retry / cancel / approve as the CLI would."""
        self.next_command += 1
        cid = self.next_command
        self.tables["commands"][(cid,)] = {
            "id": cid, "kind": kind, "target": target, "created_at": iso(self.clock.now()),
            "status": "queued", "result": None, "handled_at": None}
        return cid


class MemoryStore(StoreCore):
    def __init__(self, clock: Clock, db: MemoryDatabase | None = None) -> None:
        self.db = db or MemoryDatabase(clock)
        super().__init__(clock, len(self.db.events))
        self.tables = self.db.tables
        self.events = self.db.events
        self.db.stores.append(self)
        self.on_remote: Callable[[list[Event]], None] | None = None  # other stores' events, after their commit

    async def _apply(self, rows: dict[R.Table, list[R.Row]], events: list[Event]) -> Sequence[int] | None:
        for table, group in rows.items():  # validated first, applied after: all or nothing
            for row in group:
                if len(row) != len(table.cols):
                    raise ValueError(f"{table.name}: row of {len(row)} values for {len(table.cols)} columns")
        offered = False
        for table, group in rows.items():
            if table in _CLAIM_TABLES:
                offered |= self.db.claims.apply(table, group)
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
        if offered:
            self.db.claims.notify()
        return seqs if renumbered else None

    async def _close_backend(self) -> None:
        return None

    # -- what the CLI does on SQLite ---------------------------------------------------------------------------
    def queue_command(self, kind: str, target: str) -> int:
        """Queue a retry / cancel / approve as the CLI would."""
        return self.db.queue_command(kind, target)

    def rows(self, table: str, where: Callable[[Rec], bool] = lambda _: True) -> list[Rec]:
        """The stored rows of ``table`` that ``where`` accepts (tests read the state through this)."""
        return [dict(r) for r in self.tables[table].values() if where(r)]

    # -- named reads ---------------------------------------------------------------------------------------
    async def sources(self) -> list[SourceRecord]:
        return [SourceRecord(r["path"], r["hash"], SourceOutcome(r["outcome"]), r["mission_id"])
                for r in self.tables["sources"].values()]

    async def mission_index(self) -> list[MissionIndexEntry]:
        ms = sorted(self.tables["missions"].values(), key=lambda r: r["seq"])
        return [MissionIndexEntry(r["id"], r["source"], r["run"], r["seq"]) for r in ms]

    async def open_mission_ids(self) -> list[str]:
        ms = sorted(self.tables["missions"].values(), key=lambda r: r["seq"])
        return [r["id"] for r in ms if r["status"] in ("running", "cancelling")]

    async def load_mission(self, mission_id: str) -> LoadedMission | None:
        row = self.tables["missions"].get((mission_id,))
        if row is None:
            return None
        m = R.mission_from_row(row)
        for g in self.tables["gates"].values():
            if g["mission_id"] == mission_id:
                m.gate_state[g["name"]] = GateStatus(g["status"])
        for h in self.tables["holds"].values():
            if h["mission_id"] == mission_id:
                hold = R.hold_from_row(h)
                m.holds[(hold.kind, hold.name)] = hold
        for t in sorted((t for t in self.tables["tasks"].values() if t["mission_id"] == mission_id),
                        key=lambda t: t["idx"]):
            task = R.task_from_row(t, m)
            m.tasks[task.id] = task
        loaded = LoadedMission(m)
        attempts = sorted((a for a in self.tables["attempts"].values() if a["mission_id"] == mission_id),
                          key=lambda a: (a["task_id"], a["number"]))
        for a in attempts:
            loaded.attempts[a["task_id"]] = attempt = R.attempt_from_row(a)
            R.keep_spend(m, attempt)
        for r in self.tables["reviews"].values():
            if r["task_id"] in m.tasks:
                m.spent.add_review_row(r)
        return loaded

    async def open_assessment(self, attempt_id: str) -> Assessment | None:
        open_ = sorted((a for a in self.tables["assessments"].values()
                        if a["attempt_id"] == attempt_id and a["status"] == "running"), key=lambda a: a["id"])
        if not open_:
            return None
        row = open_[-1]
        checks = sorted((c for c in self.tables["checks"].values() if c["assessment_id"] == row["id"]),
                        key=lambda c: c["idx"])
        return R.assessment_from_row(row, checks)

    async def sla_marks(self, mission_id: str) -> list[tuple[str, str]]:
        return [(r["entity_id"], r["kind"]) for r in self.tables["sla_marks"].values()
                if r["mission_id"] == mission_id]

    async def task_dimensions(self, task_id: str, check_idx: int) -> tuple[str, Any] | None:
        row = self.tables["dimensions"].get((task_id, check_idx))
        return (row["source"], orjson.loads(row["data"])) if row else None

    async def queued_commands(self) -> list[CommandRecord]:
        return [CommandRecord(r["id"], r["kind"], r["target"])
                for r in sorted(self.tables["commands"].values(), key=lambda r: r["id"]) if r["status"] == "queued"]

    async def events_after(self, seq: int) -> list[Event]:
        return [ev for ev in self.events if ev.seq > seq]

    async def schedules(self) -> list[Schedule]:
        return [R.schedule_from_row(r) for r in sorted(self.tables["schedules"].values(), key=lambda r: r["id"])
                if r["status"] != "removed"]
