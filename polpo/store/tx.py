"""A unit of change: row upserts and the events that announce them, committed together.

Backend-neutral: a ``Tx`` holds (table, row) pairs and typed event payloads; the store it is submitted to turns
them into statements. A table whose SQL lives with another module (the cluster's claims) rides in the same way,
through :meth:`Tx.put`, so what it writes stays atomic with the state that causes it. Building one does no I/O, so state code can describe a change without awaiting.
"""

from __future__ import annotations

from datetime import datetime

import anyio

from polpo.checks.base import CheckOutcome
from polpo.clock import iso
from polpo.events.catalog import Event, Payload
from polpo.model.holds import HoldState
from polpo.model.questions import Question
from polpo.model.records import Assessment, Attempt, Mission, Task
from polpo.model.schedule import Schedule
from polpo.model.status import GateStatus
from polpo.store import rows as R

__all__ = ["OUT_OF_TERM", "PendingEvent", "Tx"]

PendingEvent = tuple[Payload, str | None, str | None]  # payload, mission id, task id
OUT_OF_TERM = "not written: the leadership term it was decided in has ended"
"""The :attr:`Tx.error` of a decision the store dropped because its leadership term had ended (:meth:`Tx.decided`)."""


class Tx:
    __slots__ = ("_done", "decision", "error", "events", "finished", "ops", "pending", "term", "ts")

    def __init__(self) -> None:
        self.ops: list[tuple[R.Table, R.Row]] = []
        self.pending: list[PendingEvent] = []
        self.events: list[Event] = []  # stamped by the store's writer, in commit order
        self.ts: str | None = None  # when it was submitted; the events' timestamp
        self.error: str | None = None  # why it was not written (it was dropped, alone, so the others could be)
        self.finished = False  # written, or dropped with ``error``
        self._done: anyio.Event | None = None  # made only for a waiter: most transactions are submitted, not awaited
        self.decision = False  # a leader's decision about a mission (see :meth:`decided`)
        self.term: int | None = None  # the store's leadership term when a decision was submitted

    @property
    def done(self) -> anyio.Event:
        """Set once the writer is through with this transaction (see :attr:`finished`)."""
        if self._done is None:
            self._done = anyio.Event()
            if self.finished:
                self._done.set()
        return self._done

    def decided(self) -> Tx:
        """This transaction is a leader's decision about a mission (a cascade, a gate, a completion, an offer),
        not a turn's own writes: on a cluster node it is written only while the leadership term it was decided in
        lasts (the store drops it once that term has ended, or when the database refuses the leader's write), and
        the next leader decides again from the store."""
        self.decision = True
        return self

    def finish(self) -> None:
        """The writer is through with it: wake whoever waits."""
        self.finished = True
        if self._done is not None:
            self._done.set()

    # -- rows -----------------------------------------------------------------------------------------------
    def mission(self, m: Mission) -> Tx:
        self.ops.append((R.MISSIONS, R.mission_row(m)))
        return self

    def task(self, t: Task) -> Tx:
        self.ops.append((R.TASKS, R.task_row(t)))
        return self

    def attempt(self, a: Attempt) -> Tx:
        self.ops.append((R.ATTEMPTS, R.attempt_row(a)))
        return self

    def assessment(self, a: Assessment) -> Tx:
        self.ops.append((R.ASSESSMENTS, R.assessment_row(a)))
        return self

    def check(self, assessment_id: str, task_id: str, result: CheckOutcome, at: datetime) -> Tx:
        self.ops.append((R.CHECKS, R.check_row(assessment_id, task_id, result, at)))
        return self

    def gate(self, mission_id: str, name: str, status: GateStatus, reason: str | None, avg_score: float | None,
             at: datetime) -> Tx:
        self.ops.append((R.GATES, (mission_id, name, status.value, reason, avg_score, iso(at))))
        return self

    def hold(self, mission_id: str, h: HoldState) -> Tx:
        self.ops.append((R.HOLDS, R.hold_row(mission_id, h)))
        return self

    def question(self, q: Question) -> Tx:
        """A question or a tool call awaiting approval (polpo.model.questions), in its current state."""
        self.ops.append((R.QUESTIONS, R.question_row(q)))
        return self

    def override(self, row: R.Row) -> Tx:
        """A person's verdict on a task (``R.OVERRIDES`` columns, in order)."""
        self.ops.append((R.OVERRIDES, row))
        return self

    def source(self, s: R.SourceRecord, at: datetime) -> Tx:
        self.ops.append((R.SOURCES, R.source_row(s, at)))
        return self

    def transcript(self, attempt_id: str, task_id: str, data_json: str) -> Tx:
        self.ops.append((R.TRANSCRIPTS, (attempt_id, task_id, data_json)))
        return self

    def review(self, assessment_id: str, check_idx: int, reviewer: int, task_id: str, model: str, ok: bool,
               data_json: str, at: datetime, *, tokens_in: int = 0, tokens_out: int = 0,
               cost: float | None = None) -> Tx:
        """A reviewer's (or the expectation judge's) trace, and what its calls spent (``cost`` None: unknown)."""
        self.ops.append((R.REVIEWS, (assessment_id, check_idx, reviewer, task_id, model, int(ok), data_json, iso(at),
                                     tokens_in, tokens_out, cost)))
        return self

    def dimensions(self, task_id: str, check_idx: int, source: str, data_json: str, at: datetime) -> Tx:
        self.ops.append((R.DIMENSIONS, (task_id, check_idx, source, data_json, iso(at))))
        return self

    def baseline(self, task_id: str, check_idx: int, value: float, data_json: str, at: datetime) -> Tx:
        """A metric's value before the task's first attempt (``data``: label, command, line, attempt, duration)."""
        self.ops.append((R.BASELINES, (task_id, check_idx, value, data_json, iso(at))))
        return self

    def sla_mark(self, entity_id: str, kind: str, entity_type: str, mission_id: str, data_json: str,
                 at: datetime) -> Tx:
        self.ops.append((R.SLA_MARKS, (entity_id, kind, entity_type, mission_id, data_json, iso(at))))
        return self

    def schedule(self, s: Schedule) -> Tx:
        self.ops.append((R.SCHEDULES, R.schedule_row(s)))
        return self

    def command_done(self, command_id: int, status: str, result: str, at: datetime) -> Tx:
        self.ops.append((R.COMMANDS_DONE, (command_id, status, result, iso(at))))
        return self

    def put(self, table: R.Table, row: R.Row) -> Tx:
        """A row of a table another module owns, whose statement comes with the table (:attr:`R.Table.write`:
        the cluster's claims, :mod:`polpo.store.claim_writes`): written in this transaction, with the rest."""
        self.ops.append((table, row))
        return self

    # -- events ---------------------------------------------------------------------------------------------
    def event(self, payload: Payload, *, mission_id: str | None = None, task_id: str | None = None) -> Tx:
        self.pending.append((payload, mission_id, task_id))
        return self
