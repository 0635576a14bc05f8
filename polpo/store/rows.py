"""The tables, and the conversion between records and rows. Backend-neutral: no SQL here.

Every write is the full mutable state of an object keyed by its primary key (an idempotent upsert), so a
backend can group a batch's rows by table and write each group at once, in any order across tables, and the
last write of a batch wins. ``insert_only`` columns keep their first value (a mission's spec, an attempt's
prompt, a task's dimension set).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from polpo.checks.base import CheckOutcome
from polpo.clock import iso, parse_iso
from polpo.model.doc import MissionDoc
from polpo.model.holds import HoldKind, HoldState, HoldStatus
from polpo.model.questions import Question, QuestionKind, QuestionStatus
from polpo.model.records import Assessment, Attempt, Mission, Task
from polpo.model.schedule import Schedule, ScheduleStatus
from polpo.model.spend import AttemptSpend
from polpo.model.status import (
    AssessmentStatus,
    AttemptKind,
    AttemptStatus,
    GateStatus,
    MissionStatus,
    SourceOutcome,
    TaskStatus,
)
from polpo.store.columns import (
    FLAG,
    FLAG_OR_NONE,
    JSON,
    TIME,
    TIME_OR_NONE,
    Col,
    Columns,
    enum,
    loaded_json,
    loaded_time,
    stored_json,
    stored_time,
)

Row = tuple[Any, ...]
Statement = Callable[[Sequence[Row], str], tuple[str, Sequence[Row]]]
"""A table's own statement: (rows, placeholder "?" or "$") → (SQL text, parameter rows)."""


@dataclass(frozen=True, eq=False)  # one object a table: compared and hashed by identity (the writer's dict keys)
class Table:
    name: str
    cols: tuple[str, ...]
    key: tuple[str, ...]
    insert_only: tuple[str, ...] = ()
    """Columns an upsert writes when it inserts and never updates: what is stored once (a prompt, a spec) and
    what never changes for a record (its mission, its position). Leaving the latter out of the UPDATE spares the
    indexes on them a delete and re-insert on every write (7.6 → 4.3 µs a task row)."""
    write: Statement | None = None
    """The statement of a table another module owns (the cluster's claims, :mod:`polpo.store.claim_writes`): its
    SQL lives with its owner, not here or in :mod:`polpo.store.sql`, and its rows still ride in a :class:`Tx`,
    atomic with the state that causes them. None: an upsert of ``cols``."""
    notify: str | None = None
    """A channel told at the commit of a batch that wrote this table (PostgreSQL's NOTIFY)."""
    additive: bool = False
    """Its rows add to what is stored (the budgets' spend) instead of writing a whole state: a batch whose commit
    was not answered must not be written again if it was committed (PostgreSQL settles it by its transaction id)."""


MISSIONS = Table("missions", ("id", "seq", "name", "source", "hash", "run", "spec", "workspace", "status", "reason",
                              "report", "warnings", "created_at", "finished_at", "home"), ("id",), ("spec",))
TASK_COLUMNS = Columns(
    "id", "mission_id", "idx", "title", "agent", Col("status", enum(TaskStatus)), "reason", "attempts", "retries",
    "fix_attempts", "total_fixes", "interruptions", Col("next_kind", enum(AttemptKind)), "feedback",
    Col("updated_at", TIME), Col("started_at", TIME_OR_NONE), Col("finished_at", TIME_OR_NONE), "score",
    "escalation_level", "model", Col("judge_used", FLAG), Col("expectations", JSON),
    "waiting_for", "questions")
"""A task's columns, declared once (:mod:`polpo.store.columns`): :data:`TASKS`, :func:`task_row`, task_from_row."""
TASKS = Table("tasks", TASK_COLUMNS.names, ("id",), ("mission_id", "idx"))
ATTEMPTS = Table("attempts", ("id", "task_id", "mission_id", "number", "kind", "agent", "status", "pid", "pid_ticks",
                              "exit_code", "signal", "timed_out", "error", "stdout_tail", "stderr_tail",
                              "stdout_bytes", "stderr_bytes", "duration", "files", "prompt", "verdict",
                              "started_at", "finished_at", "model", "outcomes", "tokens", "cost", "permanent",
                              "tokens_in", "tokens_out", "node"),
                 ("id",), ("task_id", "mission_id", "number", "prompt", "node"))
ASSESSMENTS = Table("assessments", ("id", "attempt_id", "task_id", "trigger", "status", "passed", "message",
                                    "created_at", "finished_at", "global_score", "scores"), ("id",),
                    ("attempt_id", "task_id"))
CHECKS = Table("checks", ("assessment_id", "idx", "task_id", "type", "label", "passed", "message", "details",
                          "duration", "created_at", "scores"), ("assessment_id", "idx"))
GATES = Table("gates", ("mission_id", "name", "status", "reason", "avg_score", "evaluated_at"), ("mission_id", "name"))
HOLDS = Table("holds", ("mission_id", "kind", "name", "status", "at", "expires_at", "released_at", "resumed_by", "note"),
              ("mission_id", "kind", "name"))
OVERRIDES = Table("overrides", ("task_id", "mission_id", "passed", "score", "judge_passed", "judge_score", "attempt_id",
                                "reason", "by_person", "created_at"), ("task_id",))
QUESTION_COLUMNS = Columns(
    "id", "task_id", "mission_id", "attempt_id", Col("kind", enum(QuestionKind)), "source", "text",
    Col("arguments", JSON), Col("snapshot", JSON), Col("status", enum(QuestionStatus)), Col("asked_at", TIME),
    Col("expires_at", TIME_OR_NONE), "answer", Col("approved", FLAG_OR_NONE), "answered_by",
    Col("answered_at", TIME_OR_NONE), "delivered_in", "result")
"""What agents ask of people (polpo.model.questions): the table's names, question_row and question_from_row."""
QUESTIONS = Table("questions", QUESTION_COLUMNS.names, ("id",),
                  ("task_id", "mission_id", "attempt_id", "kind", "source", "text", "arguments", "snapshot",
                   "asked_at"))  # the snapshot (a conversation) is written once
SOURCES = Table("sources", ("path", "hash", "outcome", "mission_id", "seen_at", "runs", "stamp", "reason"), ("path",))
TRANSCRIPTS = Table("transcripts", ("attempt_id", "task_id", "data"), ("attempt_id",))
REVIEWS = Table("reviews", ("assessment_id", "check_idx", "reviewer", "task_id", "model", "ok", "data", "created_at",
                            "tokens_in", "tokens_out", "cost"),
                ("assessment_id", "check_idx", "reviewer"))
DIMENSIONS = Table("dimensions", ("task_id", "check_idx", "source", "data", "created_at"), ("task_id", "check_idx"),
                   ("data", "source"))
BASELINES = Table("baselines", ("task_id", "check_idx", "value", "data", "created_at"), ("task_id", "check_idx"),
                  ("value", "data"))
"""A metric's value before its task's first attempt (polpo.engine.baselines): written once, never changed."""
SLA_MARKS = Table("sla_marks", ("entity_id", "kind", "entity_type", "mission_id", "data", "created_at"),
                  ("entity_id", "kind"), ("data", "created_at"))
SCHEDULES = Table("schedules", ("id", "source", "hash", "spec", "expr", "timezone", "status", "anchor", "updated_at",
                                "cursor_at", "queued", "last_run"), ("id",))  # polpo.model.schedule
COMMANDS_DONE = Table("commands", ("id", "status", "result", "handled_at"), ("id",))  # an update, never an insert
EVENTS = Table("events", ("seq", "ts", "event", "mission_id", "task_id", "data", "node"), ("seq",))

UPSERT_TABLES: tuple[Table, ...] = (MISSIONS, TASKS, ATTEMPTS, ASSESSMENTS, CHECKS, GATES, SOURCES, TRANSCRIPTS,
                                    REVIEWS, DIMENSIONS, BASELINES, SLA_MARKS, SCHEDULES, HOLDS, OVERRIDES,
                                    QUESTIONS)


# --------------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class SourceRecord:
    """What became of the last bytes seen at a mission-file path."""

    path: str
    hash: str  # "" once forgotten (polpo submit --force, or the file moved to done/): no bytes match it
    outcome: SourceOutcome
    mission_id: str | None
    runs: int = 0  # runs started from this path: the next one is runs + 1 (kept when the missions are pruned)
    stamp: str | None = None  # the file as it was read, once trusted (polpo.intake.stamps): a start skips it
    reason: str | None = None  # why the bytes were rejected (what waits for a person lists it), written only


# --------------------------------------------------------------------------------------------- to rows


def source_row(s: SourceRecord, at: datetime) -> Row:
    return (s.path, s.hash, s.outcome.value, s.mission_id, iso(at), s.runs, s.stamp, s.reason)


def source_from_row(r: Mapping[str, Any]) -> SourceRecord:
    return SourceRecord(r["path"], r["hash"], SourceOutcome(r["outcome"]), r["mission_id"], r["runs"], r["stamp"])



def mission_row(m: Mission) -> Row:
    """``spec`` is insert-only: the stored JSON the mission keeps, never serialised again."""
    return (m.id, m.seq, m.name, m.source, m.hash, m.run, m.doc.text(), str(m.workspace), m.status.value, m.reason,
            stored_json(m.report), orjson.dumps(m.warnings).decode(), iso(m.created_at), stored_time(m.finished_at),
            m.home)


task_row: Callable[[Task], Row] = TASK_COLUMNS.to_row()
"""A task's row, in :data:`TASKS` column order."""


def attempt_row(a: Attempt) -> Row:
    return (a.id, a.task_id, a.mission_id, a.number, a.kind.value, a.agent, a.status.value, a.pid, a.pid_ticks,
            a.exit_code, a.signal, int(a.timed_out), a.error, a.stdout_tail, a.stderr_tail, a.stdout_bytes,
            a.stderr_bytes, a.duration, stored_json(a.files), a.prompt, a.verdict, iso(a.started_at),
            stored_time(a.finished_at), a.model, stored_json(a.outcomes), a.tokens, a.cost, int(a.permanent),
            a.tokens_in, a.tokens_out, a.node)


def assessment_row(a: Assessment) -> Row:
    return (a.id, a.attempt_id, a.task_id, a.trigger.value, a.status.value,
            None if a.passed is None else int(a.passed), a.message, iso(a.created_at), stored_time(a.finished_at),
            a.global_score, stored_json(a.scores))


def check_row(assessment_id: str, task_id: str, c: CheckOutcome, at: datetime) -> Row:
    return (assessment_id, c.index, task_id, c.type, c.label, int(c.passed), c.message, c.details, c.duration,
            iso(at), stored_json(c.row_json()))


# -------------------------------------------------------------------------------------------- from rows


def mission_from_row(r: Mapping[str, Any]) -> Mission:
    """A mission record (without its tasks) from its row; the stored spec is validated again, task by task."""
    return Mission(id=r["id"], seq=r["seq"], name=r["name"], source=r["source"], hash=r["hash"], run=r["run"],
                   doc=MissionDoc.parse(r["spec"]), workspace=Path(r["workspace"]),
                   status=MissionStatus(r["status"]), created_at=parse_iso(r["created_at"]),
                   warnings=orjson.loads(r["warnings"]), reason=r["reason"], report=loaded_json(r["report"]),
                   finished_at=loaded_time(r["finished_at"]), home=r["home"])


task_from_row: Callable[[Mapping[str, Any], Mission], Task] = TASK_COLUMNS.from_row(
    Task, "m", mission_id="m.id", doc="m.doc")
"""A task record of mission ``m`` from its row (the mission's document stays the mission's)."""


def keep_spend(m: Mission, a: Attempt) -> None:
    """A loaded attempt's spend, on its mission (for the report after a restart)."""
    spent = AttemptSpend.of(a.task_id, a.kind.value, a.agent, a.model, a.tokens, a.tokens_in, a.tokens_out, a.cost,
                            stored_time(a.finished_at))
    if spent is not None:
        m.spent.attempts[a.id] = spent


def attempt_from_row(a: Mapping[str, Any]) -> Attempt:
    return Attempt(id=a["id"], task_id=a["task_id"], mission_id=a["mission_id"], number=a["number"],
                   kind=AttemptKind(a["kind"]), agent=a["agent"], status=AttemptStatus(a["status"]),
                   started_at=parse_iso(a["started_at"]), prompt=a["prompt"] or "", pid=a["pid"],
                   pid_ticks=a["pid_ticks"], exit_code=a["exit_code"], signal=a["signal"],
                   timed_out=bool(a["timed_out"]), error=a["error"], stdout_tail=a["stdout_tail"] or "",
                   stderr_tail=a["stderr_tail"] or "", stdout_bytes=a["stdout_bytes"] or 0,
                   stderr_bytes=a["stderr_bytes"] or 0, duration=a["duration"], files=loaded_json(a["files"]),
                   verdict=a["verdict"], finished_at=loaded_time(a["finished_at"]), model=a["model"],
                   outcomes=loaded_json(a["outcomes"]), tokens=a["tokens"], cost=a["cost"],
                   permanent=bool(a.get("permanent")), tokens_in=a.get("tokens_in"), tokens_out=a.get("tokens_out"),
                   node=a.get("node"))


def assessment_from_row(r: Mapping[str, Any], checks: Sequence[Mapping[str, Any]]) -> Assessment:
    a = Assessment(id=r["id"], attempt_id=r["attempt_id"], task_id=r["task_id"], trigger=AttemptKind(r["trigger"]),
                   status=AssessmentStatus(r["status"]), created_at=parse_iso(r["created_at"]))
    for c in checks:
        extra = orjson.loads(c["scores"]) if c["scores"] else None
        a.checks.append(CheckOutcome(type=c["type"], label=c["label"], passed=bool(c["passed"]), message=c["message"],
                                     details=c["details"], duration=c["duration"], index=c["idx"],
                                     **CheckOutcome.fields_from_row_json(extra)))
    return a


def schedule_row(s: Schedule) -> Row:
    return (s.id, s.source, s.hash, s.spec, s.expr, s.timezone, s.status.value, iso(s.anchor), iso(s.updated_at),
            stored_time(s.cursor), s.queued, s.last_run)


def schedule_from_row(r: Mapping[str, Any]) -> Schedule:
    return Schedule(id=r["id"], source=r["source"], hash=r["hash"], spec=r["spec"], expr=r["expr"],
                    timezone=r["timezone"], status=ScheduleStatus(r["status"]), anchor=parse_iso(r["anchor"]),
                    updated_at=parse_iso(r["updated_at"]), cursor=loaded_time(r["cursor_at"]), queued=r["queued"],
                    last_run=r["last_run"])


question_row: Callable[[Question], Row] = QUESTION_COLUMNS.to_row()
question_from_row: Callable[[Mapping[str, Any]], Question] = QUESTION_COLUMNS.from_row(Question)


def hold_row(mission_id: str, h: HoldState) -> Row:
    return (mission_id, h.kind.value, h.name, h.status.value, iso(h.at), stored_time(h.expires_at),
            stored_time(h.released_at), h.by, h.note)


def hold_from_row(r: Mapping[str, Any]) -> HoldState:
    return HoldState(kind=HoldKind(r["kind"]), name=r["name"], status=HoldStatus(r["status"]), at=parse_iso(r["at"]),
                     expires_at=loaded_time(r["expires_at"]), released_at=loaded_time(r["released_at"]),
                     by=r["resumed_by"], note=r["note"])


def gate_status(v: str) -> GateStatus:
    return GateStatus(v)
