"""What every store backend shares: the queue, the single group-commit writer, stamping and publishing events.

Callers ``submit`` a ``Tx`` (no wait) or ``commit`` it (wait until durable). One writer task drains everything
queued into ONE backend transaction (rows grouped by table, then the event rows), and only after it commits
writes each event to ``events.jsonl`` and hands it to subscribers, in ``seq`` order. So state is durable before
its event is seen, the cost per change does not grow with the number of tasks, and under load many changes
share a commit. A backend implements :meth:`StoreCore._apply` and the named reads of the protocol.

Events are numbered by the writer from an in-process counter, unless the backend numbers them inside its
transaction (PostgreSQL: one sequence shared by every node) and returns the numbers from ``_apply``; either
way one node publishes in commit order.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import replace

import anyio
import orjson

from polpo.clock import Clock, iso
from polpo.events.catalog import Event
from polpo.events.log import EventLog
from polpo.events.pipeline import event_data
from polpo.store.protocol import StoreError, Subscriber
from polpo.store.rows import Row, Table
from polpo.store.tx import Tx

log = logging.getLogger("polpo.store")

__all__ = ["StoreCore"]


class StoreCore:
    def __init__(self, clock: Clock, max_seq: int) -> None:
        self.clock = clock
        self._seq = max_seq
        self._queue: deque[Tx] = deque()
        self._wake = anyio.Event()
        self._subscribers: list[Subscriber] = []
        self.event_log: EventLog | None = None
        self._closed = False
        self.commits = 0  # batches written, for benchmarks

    # -- backend hooks -------------------------------------------------------------------------------------
    async def _apply(self, rows: dict[Table, list[Row]], events: list[Event]) -> Sequence[int] | None:
        """Write one batch in one transaction (all or nothing).

        Return None to keep the writer's numbering, or the ``seq`` the backend gave each event (in order,
        increasing) when the database numbers them itself.
        """
        raise NotImplementedError

    async def _close_backend(self) -> None:
        raise NotImplementedError

    async def events_after(self, seq: int) -> list[Event]:
        raise NotImplementedError

    # -- writing -------------------------------------------------------------------------------------------
    def tx(self) -> Tx:
        return Tx()

    def submit(self, tx: Tx) -> Tx:
        if self._closed:
            raise StoreError("store is closed")
        tx.ts = iso(self.clock.now())
        self._queue.append(tx)
        self._wake.set()
        return tx

    async def commit(self, tx: Tx) -> None:
        self.submit(tx)
        await tx.done.wait()

    async def flush(self) -> None:
        await self.commit(Tx())

    def subscribe(self, fn: Subscriber) -> None:
        self._subscribers.append(fn)

    async def run_writer(self) -> None:
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
        rows: dict[Table, list[Row]] = {}
        events: list[Event] = []
        first_seq = self._seq
        for tx in batch:
            for table, row in tx.ops:
                rows.setdefault(table, []).append(row)
            for payload, mission_id, task_id in tx.pending:
                self._seq += 1
                data = event_data(payload)
                ev = Event(self._seq, tx.ts or "", payload.NAME, mission_id, task_id, data, orjson.dumps(data))
                tx.events.append(ev)
                events.append(ev)
        if rows or events:
            try:
                seqs = await self._apply(rows, events)
            except BaseException:
                self._seq = first_seq
                raise
            self.commits += 1
            if seqs is not None and events:
                events = self._renumber(batch, seqs)
        self._publish(events)
        for tx in batch:
            tx.done.set()

    def _renumber(self, batch: list[Tx], seqs: Sequence[int]) -> list[Event]:
        """Give the batch's events the numbers the database assigned (same order)."""
        if len(seqs) != sum(len(tx.events) for tx in batch):
            raise StoreError(f"the backend numbered {len(seqs)} events of {sum(len(tx.events) for tx in batch)}")
        it = iter(seqs)
        events: list[Event] = []
        for tx in batch:
            tx.events[:] = [replace(ev, seq=next(it)) for ev in tx.events]
            events.extend(tx.events)
        self._seq = events[-1].seq
        return events

    def _publish(self, events: list[Event]) -> None:
        if self.event_log is not None and events:
            try:
                self.event_log.write_many(events)
            except OSError:  # the store has them; the next batch (or a restart) catches the log up
                log.exception("could not append %d event(s) to the event log", len(events))
        for ev in events:
            for fn in self._subscribers:
                try:
                    fn(ev)
                except Exception:  # a subscriber never stops the writer
                    log.exception("event subscriber failed on %s", ev.event)

    async def catch_up_log(self) -> int:
        """Write to the log every stored event it lacks (after a crash between commit and write)."""
        if self.event_log is None:
            return 0
        missing = await self.events_after(self.event_log.last_seq)
        self.event_log.write_many(missing)
        return len(missing)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._close_backend()
        finally:
            if self.event_log is not None:
                self.event_log.close()
