"""The store: one aiosqlite writer connection, group commit, events as an outbox.

Callers describe a state change as a ``Tx`` (row upserts + the events announcing them) and ``submit`` it;
a single writer task drains the queue and commits everything queued in ONE SQLite transaction, then writes
each event to the log and hands it to subscribers, in ``seq`` order. So state is durable before its event is
seen, the cost per change does not grow with the number of tasks, and under load many changes share a
commit. ``commit`` waits for durability (used before a side effect such as starting a process).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import aiosqlite
import anyio

from polpo.clock import Clock, iso
from polpo.engine.model import Assessment, Attempt, Mission, Task
from polpo.events.catalog import Event
from polpo.events.log import EventLog
from polpo.store import rows as R
from polpo.store.schema import MIGRATIONS, PRAGMAS, SCHEMA_VERSION

log = logging.getLogger("polpo.store")

Subscriber = Callable[[Event], None]


class StoreError(RuntimeError):
    pass


class Tx:
    """A unit of change: rows and the events that announce them, committed together."""

    __slots__ = ("_pending_events", "done", "events", "ops")

    def __init__(self) -> None:
        self.ops: list[tuple[str, R.Row]] = []
        self._pending_events: list[tuple[str, str | None, str | None, dict[str, Any]]] = []
        self.events: list[Event] = []
        self.done = anyio.Event()

    def mission(self, m: Mission, spec_json: str | None = None) -> Tx:
        self.ops.append((R.MISSION_SQL, R.mission_row(m, spec_json)))
        return self

    def task(self, t: Task) -> Tx:
        self.ops.append((R.TASK_SQL, R.task_row(t)))
        return self

    def attempt(self, a: Attempt) -> Tx:
        self.ops.append((R.ATTEMPT_SQL, R.attempt_row(a)))
        return self

    def assessment(self, a: Assessment) -> Tx:
        self.ops.append((R.ASSESSMENT_SQL, R.assessment_row(a)))
        return self

    def check(self, row: R.Row) -> Tx:
        self.ops.append((R.CHECK_SQL, row))
        return self

    def gate(self, row: R.Row) -> Tx:
        self.ops.append((R.GATE_SQL, row))
        return self

    def source(self, row: R.Row) -> Tx:
        self.ops.append((R.SOURCE_SQL, row))
        return self

    def transcript(self, attempt_id: str, task_id: str, data_json: str) -> Tx:
        self.ops.append((R.TRANSCRIPT_SQL, (attempt_id, task_id, data_json)))
        return self

    def review(self, row: R.Row) -> Tx:
        self.ops.append((R.REVIEW_SQL, row))
        return self

    def dimensions(self, row: R.Row) -> Tx:
        self.ops.append((R.DIMENSION_SQL, row))
        return self

    def sla_mark(self, row: R.Row) -> Tx:
        self.ops.append((R.SLA_MARK_SQL, row))
        return self

    def command_done(self, command_id: int, status: str, result: str, handled_at: str) -> Tx:
        self.ops.append((R.COMMAND_DONE_SQL, (status, result, handled_at, command_id)))
        return self

    def event(self, event_name: str, /, *, mission_id: str | None = None, task_id: str | None = None,
              **data: Any) -> Tx:
        self._pending_events.append((event_name, mission_id, task_id, data))
        return self


class Store:
    def __init__(self, db: aiosqlite.Connection, path: Path, clock: Clock, max_seq: int) -> None:
        self.db = db
        self.path = path
        self.clock = clock
        self._seq = max_seq
        self._queue: deque[Tx] = deque()
        self._wake = anyio.Event()
        self._subscribers: list[Subscriber] = []
        self.event_log: EventLog | None = None
        self._closed = False
        self.commits = 0  # batches written, for benchmarks

    @classmethod
    async def open(cls, path: Path, *, clock: Clock) -> Store:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = await aiosqlite.connect(path, isolation_level=None)
        for pragma in PRAGMAS:
            await db.execute(pragma)
        await migrate(db)
        async with db.execute("SELECT COALESCE(MAX(seq), 0) FROM events") as cur:
            row = await cur.fetchone()
        return cls(db, path, clock, int(row[0]) if row else 0)

    # -- writing -------------------------------------------------------------------------------------
    def tx(self) -> Tx:
        return Tx()

    def submit(self, tx: Tx) -> Tx:
        """Queue a change; it becomes durable in submission order. Does not wait."""
        if self._closed:
            raise StoreError("store is closed")
        ts = iso(self.clock.now())
        for name, mission_id, task_id, data in tx._pending_events:
            self._seq += 1
            tx.events.append(Event(self._seq, ts, name, mission_id, task_id, data))
        tx._pending_events.clear()
        self._queue.append(tx)
        self._wake.set()
        return tx

    async def commit(self, tx: Tx) -> None:
        """Queue a change and wait until it is durable and its events are published."""
        self.submit(tx)
        await tx.done.wait()

    async def flush(self) -> None:
        await self.commit(Tx())

    def subscribe(self, fn: Subscriber) -> None:
        self._subscribers.append(fn)

    async def run_writer(self) -> None:
        """The single writer. Runs until cancelled; drains what is queued before it stops."""
        try:
            while True:
                if not self._queue:
                    self._wake = anyio.Event()
                    await self._wake.wait()
                await self._write_batch()
        finally:
            with anyio.CancelScope(shield=True):
                while self._queue:
                    await self._write_batch()

    async def _write_batch(self) -> None:
        batch = list(self._queue)
        self._queue.clear()
        groups: dict[str, list[R.Row]] = {}
        events: list[Event] = []
        for tx in batch:
            for sql, row in tx.ops:
                groups.setdefault(sql, []).append(row)
            events.extend(tx.events)
        if events:
            groups[R.EVENT_SQL] = [R.event_row(ev) for ev in events]
        if groups:
            await self.db.execute("BEGIN IMMEDIATE")
            try:
                for sql, rows in groups.items():
                    await self.db.executemany(sql, rows)
                await self.db.commit()
            except BaseException:
                await self.db.rollback()
                raise
            self.commits += 1
        for ev in events:
            self._publish(ev)
        for tx in batch:
            tx.done.set()

    def _publish(self, ev: Event) -> None:
        if self.event_log is not None:
            self.event_log.write(ev)
        for fn in self._subscribers:
            try:
                fn(ev)
            except Exception:  # a subscriber never stops the writer
                log.exception("event subscriber failed on %s", ev.event)

    # -- reading -------------------------------------------------------------------------------------
    async def fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[aiosqlite.Row]:
        self.db.row_factory = aiosqlite.Row
        async with self.db.execute(sql, tuple(params)) as cur:
            return list(await cur.fetchall())

    async def catch_up_log(self) -> int:
        """Write to the log every stored event it lacks (after a crash between commit and write)."""
        if self.event_log is None:
            return 0
        rows = await self.fetchall(
            "SELECT seq, ts, event, mission_id, task_id, data FROM events WHERE seq > ? ORDER BY seq",
            (self.event_log.last_seq,),
        )
        import orjson

        for r in rows:
            self.event_log.write(Event(r["seq"], r["ts"], r["event"], r["mission_id"], r["task_id"],
                                       orjson.loads(r["data"])))
        return len(rows)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            with contextlib.suppress(sqlite3.OperationalError):  # best effort: a reader may still hold the table
                await self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            await self.db.close()
            if self.event_log is not None:
                self.event_log.close()


async def migrate(db: aiosqlite.Connection) -> int:
    async with db.execute("PRAGMA user_version") as cur:
        row = await cur.fetchone()
    version = int(row[0]) if row else 0
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"the state database is schema version {version}, newer than this polpo ({SCHEMA_VERSION}); "
            "upgrade polpo or point state_dir elsewhere"
        )
    if version == SCHEMA_VERSION:
        return version
    await db.execute("BEGIN IMMEDIATE")
    try:
        for v in range(version, SCHEMA_VERSION):
            for stmt in MIGRATIONS[v].split(";"):
                if stmt.strip():
                    await db.execute(stmt)
        await db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        await db.commit()
    except BaseException:
        await db.rollback()
        raise
    return SCHEMA_VERSION
