"""What every store backend shares: the queue, the single group-commit writer, stamping and publishing events.

Callers ``submit`` a ``Tx`` (no wait) or ``commit`` it (wait until durable). One writer task drains everything
queued into ONE backend transaction (rows grouped by table, then the event rows), and only after it commits
writes each event to ``events.jsonl`` and hands it to subscribers, in ``seq`` order. So state is durable before
its event is seen, the cost per change does not grow with the number of tasks, and under load many changes
share a commit. A backend implements :meth:`StoreCore._apply` and the named reads of the protocol.

The store's identity (:mod:`polpo.store.identity`) is checked before each batch and every ``identity_every``
seconds: once the database is deleted or replaced, nothing more is written (``lost``), waiting commits fail,
and ``on_lost`` tells the daemon, which stops.

Events are numbered by the writer from an in-process counter, unless the backend numbers them inside its
transaction (PostgreSQL: one sequence shared by every node) and returns the numbers from ``_apply``; either
way one node publishes in commit order.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import anyio
import anyio.lowlevel
import orjson

from polpo.clock import Clock, iso
from polpo.events.catalog import Event, FaultPaused, FaultResumed
from polpo.events.log import EventLog
from polpo.events.pipeline import event_data
from polpo.fsfaults import Pause, errno_name
from polpo.llm.secrets import secret_values
from polpo.store.errors import StoreUnavailable
from polpo.store.fencing import Deposed, Fenced
from polpo.store.identity import StoreLost, lost_advice, lost_message
from polpo.store.protocol import StoreError, Subscriber
from polpo.store.rows import ASSESSMENTS, ATTEMPTS, TASKS, Row, Table
from polpo.store.tx import OUT_OF_TERM, Tx

log = logging.getLogger("polpo.store")

__all__ = ["UNAVAILABLE_BACKOFF", "UNAVAILABLE_BACKOFF_MAX", "StoreCore"]

UNAVAILABLE_BACKOFF = 1.0  # seconds before the first new try of a batch the backend refused (doubling, jittered)
UNAVAILABLE_BACKOFF_MAX = 30.0  # (the same backoff every path waits a passing fault out with: polpo.fsfaults.Pause)
FLUSH_WITHIN = 5.0  # seconds the writer may take, once stopped, to write what is still queued


# Tables whose rows are whole records upserted by id (the first column): when one batch writes a record several
# times (a task's turn often submits three or four states at once), only its last state is written, with the
# insert-only columns of its first (what the database would have kept). Value: those columns' positions.
_LAST_WINS: dict[Table, tuple[int, ...]] = {
    t: tuple(t.cols.index(c) for c in t.insert_only) for t in (TASKS, ATTEMPTS, ASSESSMENTS)}


class StoreCore:
    identity_every = 1.0  # seconds between two checks of the store's identity while the daemon runs
    unavailable_advice = "free space or fix permissions"  # what lets a refused write through (per backend)

    def __init__(self, clock: Clock, max_seq: int, identity: str = "") -> None:
        self.clock = clock
        self.identity = identity  # meta.store_id, read at open
        self.lost: str | None = None  # set once the database was deleted or replaced: nothing is written after
        self.on_lost: Callable[[str], None] | None = None
        self.fenced: str | None = None  # set once this node may no longer write (polpo.store.fencing): never unset
        self.term: int | None = None
        """The leadership term whose decisions (``Tx.decided``) this store writes: None on one node (it always
        leads); on a cluster node the role's current term while it leads, 0 while it does not."""
        self.rescued: Path | None = None  # a copy of what a lost database held, if the backend could make one
        self._seq = max_seq
        self.opened_seq = max_seq
        """The last stored event's number when this store was opened: what a run found, not what it wrote."""
        self._queue: deque[Tx] = deque()
        self._wake = anyio.Event()
        self._subscribers: list[Subscriber] = []
        self.event_log: EventLog | None = None
        self.node: str | None = None  # stamped on every event this daemon produces
        self.log_follower: Callable[[], None] | None = None  # set: a follower writes the log, in cluster order
        self._closed = False
        self.commits = 0  # batches written, for benchmarks
        self.unavailable: str | None = None  # why the last write failed, while the backend cannot be written
        self._pause = Pause(clock.monotonic, UNAVAILABLE_BACKOFF, UNAVAILABLE_BACKOFF_MAX)
        self.log_pause = Pause(clock.monotonic, UNAVAILABLE_BACKOFF, UNAVAILABLE_BACKOFF_MAX)  # events.jsonl behind
        self._log_retry_at = 0.0  # (anyio's clock) when the log next tries to catch up with the store

    @property
    def last_seq(self) -> int:
        """The newest event's number this store knows of (at open: the database's newest)."""
        return self._seq

    # -- backend hooks -------------------------------------------------------------------------------------
    async def _apply(self, rows: dict[Table, list[Row]], events: list[Event]) -> Sequence[int] | None:
        """Write one batch in one transaction (all or nothing).

        Return None to keep the writer's numbering, or the ``seq`` the backend gave each event (in order,
        increasing) when the database numbers them itself.
        """
        raise NotImplementedError

    async def _close_backend(self) -> None:
        raise NotImplementedError

    async def events_after(self, seq: int, limit: int | None = None) -> list[Event]:
        raise NotImplementedError

    @property
    def where(self) -> str:
        """The store, for messages (the SQLite file, the PostgreSQL server and database)."""
        return "in memory"

    def away(self, exc: BaseException) -> bool:
        """Whether ``exc``, raised by a read, says the store is away for now (an outage that passes), not that the
        read itself was wrong: a reader waits and tries again rather than deciding on it."""
        return isinstance(exc, StoreUnavailable)

    def _gone(self) -> str | None:
        """Cheap, before each batch: how the database went away ("was deleted"…), None while it is in place."""
        return None

    async def _gone_now(self) -> str | None:
        """The periodic check (PostgreSQL asks the server; by default the same as :meth:`_gone`)."""
        return self._gone()

    # -- identity ------------------------------------------------------------------------------------------
    async def watch_identity(self) -> None:
        """Every ``identity_every`` seconds: stop writing once the database is deleted or replaced."""
        while self.lost is None:
            await anyio.sleep(self.identity_every)
            if (what := await self._gone_now()) is not None:
                self._lose(what)

    def _lose(self, what: str) -> None:
        if self.lost is not None:
            return
        self.lost = lost_message(self.where, what)
        log.error("%s", self.lost)
        if self.on_lost is not None:
            self.on_lost(self.lost)

    def fence(self, reason: str) -> None:
        """From now on nothing is written: queued and later transactions fail with :class:`Fenced` (a cluster node
        that lost its lease: whatever it decided may already be decided again elsewhere)."""
        if self.fenced is None:
            self.fenced = reason
            log.error("this node stops writing: %s", reason)

    # -- writing -------------------------------------------------------------------------------------------
    def tx(self) -> Tx:
        return Tx()

    def submit(self, tx: Tx) -> Tx:
        if self._closed:
            raise StoreError("store is closed")
        tx.ts = iso(self.clock.now())
        if tx.decision:
            tx.term = self.term
        self._queue.append(tx)
        self._wake.set()
        return tx

    async def commit(self, tx: Tx) -> None:
        self.submit(tx)
        if not tx.finished:
            await tx.done.wait()
        if tx.error is not None:
            if self.fenced is not None:
                raise Fenced(tx.error)
            raise StoreLost(tx.error) if self.lost is not None else StoreError(tx.error)

    async def flush(self) -> None:
        await self.commit(Tx())

    def subscribe(self, fn: Subscriber) -> None:
        self._subscribers.append(fn)

    async def run_writer(self) -> None:
        try:
            while True:
                if not self._queue:
                    self._wake = anyio.Event()
                    if self.log_pause.paused:  # the log is behind: woken by new work or when it tries again
                        with anyio.move_on_after(max(0.0, self._log_retry_at - anyio.current_time())):
                            await self._wake.wait()
                    else:
                        await self._wake.wait()
                    await anyio.lowlevel.checkpoint()  # one turn of the loop: what else is ready joins the batch
                if self._queue:
                    batch = list(self._queue)
                    self._queue.clear()
                    await self._commit(batch)
                if self.log_pause.paused and anyio.current_time() >= self._log_retry_at:
                    await self._catch_up_while_running()
        finally:  # what is queued is written, if the store answers within FLUSH_WITHIN (else the next start
            # recovers without it, as after a crash: a half-open network must not hold the stop for hours)
            with anyio.CancelScope(shield=True, deadline=anyio.current_time() + FLUSH_WITHIN):
                while self._queue and self.unavailable is None and self.lost is None and self.fenced is None:
                    batch = list(self._queue)
                    self._queue.clear()
                    await self._commit(batch, wait=False)

    async def _commit(self, batch: list[Tx], *, wait: bool = True) -> None:
        """Write ``batch``; while the backend is unavailable keep it and try again (with backoff). A batch that
        fails for another reason is written one transaction at a time, so only the faulty one is dropped."""
        while True:
            if self.term is not None:
                batch = self._in_term(batch)
            try:
                await self._write_batch(batch)
            except Deposed as e:  # the database ended the leader's term: its decisions go, the rest is written
                log.warning("this node no longer leads (%s): its queued decisions are dropped; the next leader "
                            "settles from the store", e)
                self.term = 0
                continue
            except StoreLost as e:  # never written anywhere: the database is gone, or this node was fenced
                for tx in batch:
                    tx.error = str(e)
                    tx.finish()
                return
            except StoreUnavailable as e:
                delay = self._unavailable(str(e))
                if not wait:
                    return
                await anyio.sleep(delay)
                continue
            except Exception as e:
                if len(batch) > 1:
                    for tx in batch:
                        await self._commit([tx], wait=wait)
                    return
                log.exception("a transaction could not be written and was dropped")
                batch[0].error = f"{type(e).__name__}: {e}"
                batch[0].finish()
                return
            if self.unavailable is not None:
                self._available_again()
            return

    def _in_term(self, batch: list[Tx]) -> list[Tx]:
        """``batch`` without the decisions of a leadership term that has ended (they are finished, unwritten)."""
        keep = [tx for tx in batch if not tx.decision or (self.term and tx.term == self.term)]
        if len(keep) == len(batch):
            return batch
        for tx in batch:
            if tx.decision and not (self.term and tx.term == self.term):
                tx.events.clear()  # (stamped by a refused try)
                tx.error = OUT_OF_TERM
                tx.finish()
        log.info("dropped %d decision(s) of a leadership term that has ended", len(batch) - len(keep))
        return keep

    def _unavailable(self, reason: str) -> float:
        """The store cannot be written: say so (once, then a reminder every 5 minutes); the seconds to wait."""
        delay = self._pause.failed()
        if self._pause.tries == 1:
            log.error("cannot write the state store: %s; no new work starts and nothing is lost: polpo waits "
                      "and tries again (%s)", reason, self.unavailable_advice)
        elif self._pause.remind():
            log.error("still cannot write the state store after %.0f s: %s", self._pause.waited(), reason)
        self.unavailable = reason
        return delay

    def _available_again(self) -> None:
        log.warning("the state store is writable again after %.0f s; work resumes", self._pause.done() or 0.0)
        self.unavailable = None

    async def _write_batch(self, batch: list[Tx]) -> None:
        if self.fenced is not None:
            raise Fenced(self.fenced)
        if self.lost is None and (what := self._gone()) is not None:
            self._lose(what)
        if self.lost is not None:
            raise StoreLost(self.lost)
        rows: dict[Table, list[Row]] = {}
        latest: dict[tuple[Table, object], Row] = {}
        events: list[Event] = []
        first_seq = self._seq
        secrets = secret_values()  # once per batch, not per event
        for tx in batch:
            tx.events.clear()  # a batch tried again is stamped again
            for table, row in tx.ops:
                group = rows.setdefault(table, [])  # tables keep the order they first appear in
                keep = _LAST_WINS.get(table)
                if keep is not None:
                    first = latest.get((table, row[0]))
                    if first is not None and any(first[i] != row[i] for i in keep):  # (they seldom differ)
                        row = tuple(first[i] if i in keep else v for i, v in enumerate(row))
                    latest[table, row[0]] = row
                else:
                    group.append(row)
            for payload, mission_id, task_id in tx.pending:
                self._seq += 1
                data = event_data(payload, secrets)
                ev = Event(self._seq, tx.ts or "", payload.NAME, mission_id, task_id, data, orjson.dumps(data),
                           self.node)
                tx.events.append(ev)
                events.append(ev)
        for (table, _), row in latest.items():
            rows[table].append(row)
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
            tx.finish()

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
        if self.log_follower is not None:
            if events:
                self.log_follower()  # other nodes' earlier events go first: the follower writes them all in order
        elif self.event_log is not None and events and not self.log_pause.paused:  # (paused: it catches up)
            try:
                self.event_log.write_many(events)
            except OSError as e:  # the store has them: the writer catches the log up when it can be written
                self._log_failed(e)
        for ev in events:
            for fn in self._subscribers:
                try:
                    fn(ev)
                except Exception:  # a subscriber never stops the writer
                    log.exception("event subscriber failed on %s", ev.event)

    # -- the event log behind the store -------------------------------------------------------------------
    def _log_failed(self, e: OSError) -> None:
        """events.jsonl could not be written (a full or read-only disk…): nothing is lost, the store has every
        event; the writer writes what the log lacks from the store once it can (with the backoff)."""
        assert self.event_log is not None
        delay = self.log_pause.failed()
        self._log_retry_at = anyio.current_time() + delay
        if self.log_pause.tries == 1:
            error = f"{errno_name(e.errno)} ({e})" if e.errno else f"{type(e).__name__}: {e}"
            log.error("cannot write the event log %s: %s; the events are in the store and are written there as "
                      "soon as it can be written (free space or fix permissions)", self.event_log.path, error)
            if not self._closed:
                self.submit(self.tx().event(FaultPaused(work="event log", path=str(self.event_log.path),
                                                        error=error[:500], retry_in=round(delay, 1))))
        elif self.log_pause.remind():
            log.error("still cannot write the event log after %.0f s: %s", self.log_pause.waited(), e)

    async def _catch_up_while_running(self) -> None:
        tries = self.log_pause.tries
        try:
            await self.catch_up_log()
        except OSError as e:
            self._log_failed(e)
            return
        except Exception:  # a read of the store failed: try again later, like a write of the log
            log.exception("could not read the events the event log lacks")
            self._log_retry_at = anyio.current_time() + self.log_pause.failed()
            return
        waited = self.log_pause.done() or 0.0
        assert self.event_log is not None
        log.warning("the event log is written again after %.1f s; it has caught up with the store", waited)
        if not self._closed:
            self.submit(self.tx().event(FaultResumed(work="event log", path=str(self.event_log.path),
                                                     waited=round(waited, 1), tries=tries)))

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
            if self.lost is not None:  # what to do now, with the copy the backend saved (if it could)
                self.lost = f"{self.lost}; {lost_advice(self.rescued, self.where)}"
        finally:
            if self.event_log is not None:
                self.event_log.close()
