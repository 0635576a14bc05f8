"""Row upserts: the full mutable state of an object, so the last write of a batch wins.

Every statement is an idempotent ``INSERT … ON CONFLICT DO UPDATE`` keyed by the primary key. That lets the
writer group a batch's statements by SQL text and run each group with one ``executemany`` — a few awaited
calls per batch, whatever its size — without caring about the order of statements across tables.
"""

from __future__ import annotations

from typing import Any

import orjson

from polpo.clock import iso
from polpo.engine.model import Assessment, Attempt, Mission, Task
from polpo.events.catalog import Event

Row = tuple[Any, ...]


def _upsert(table: str, cols: tuple[str, ...], key: tuple[str, ...], insert_only: tuple[str, ...] = ()) -> str:
    placeholders = ", ".join("?" for _ in cols)
    updates = ", ".join(f"{c}=excluded.{c}" for c in cols if c not in key and c not in insert_only)
    return (
        f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({placeholders}) "
        f"ON CONFLICT({', '.join(key)}) DO UPDATE SET {updates}"
    )


def _ts(v: Any) -> str | None:
    return iso(v) if v is not None else None


MISSION_COLS = ("id", "seq", "name", "source", "hash", "run", "spec", "workspace", "status", "reason",
                "report", "warnings", "created_at", "finished_at")
MISSION_SQL = _upsert("missions", MISSION_COLS, ("id",), insert_only=("spec",))


def mission_row(m: Mission, spec_json: str | None = None) -> Row:
    return (m.id, m.seq, m.name, m.source, m.hash, m.run,
            spec_json if spec_json is not None else m.spec.model_dump_json(exclude_none=True),
            str(m.workspace), m.status, m.reason,
            orjson.dumps(m.report).decode() if m.report is not None else None,
            orjson.dumps(m.warnings).decode(), iso(m.created_at), _ts(m.finished_at))


TASK_COLS = ("id", "mission_id", "idx", "title", "agent", "status", "reason", "attempts", "retries",
             "fix_attempts", "total_fixes", "interruptions", "next_kind", "feedback", "updated_at",
             "started_at", "finished_at", "score", "escalation_level", "model", "judge_used", "expectations",
             "approval")
TASK_SQL = _upsert("tasks", TASK_COLS, ("id",))


def task_row(t: Task) -> Row:
    return (t.id, t.mission_id, t.idx, t.title, t.agent, t.status, t.reason, t.attempts, t.retries,
            t.fix_attempts, t.total_fixes, t.interruptions, t.next_kind, t.feedback, iso(t.updated_at),
            _ts(t.started_at), _ts(t.finished_at), t.score, t.escalation_level, t.model, int(t.judge_used),
            _json(t.expectations), t.approval)


def _json(v: Any) -> str | None:
    return orjson.dumps(v).decode() if v is not None else None


ATTEMPT_COLS = ("id", "task_id", "mission_id", "number", "kind", "agent", "status", "pid", "pid_ticks",
                "exit_code", "signal", "timed_out", "error", "stdout_tail", "stderr_tail", "stdout_bytes",
                "stderr_bytes", "duration", "files", "prompt", "verdict", "started_at", "finished_at", "model",
                "outcomes", "tokens", "cost")
ATTEMPT_SQL = _upsert("attempts", ATTEMPT_COLS, ("id",), insert_only=("prompt",))


def attempt_row(a: Attempt) -> Row:
    return (a.id, a.task_id, a.mission_id, a.number, a.kind, a.agent, a.status, a.pid, a.pid_ticks,
            a.exit_code, a.signal, int(a.timed_out), a.error, a.stdout_tail, a.stderr_tail, a.stdout_bytes,
            a.stderr_bytes, a.duration, orjson.dumps(a.files).decode() if a.files is not None else None,
            a.prompt, a.verdict, iso(a.started_at), _ts(a.finished_at), a.model, _json(a.outcomes), a.tokens,
            a.cost)


ASSESSMENT_COLS = ("id", "attempt_id", "task_id", "trigger", "status", "passed", "message", "created_at",
                   "finished_at", "global_score", "scores")
ASSESSMENT_SQL = _upsert("assessments", ASSESSMENT_COLS, ("id",))


def assessment_row(a: Assessment) -> Row:
    return (a.id, a.attempt_id, a.task_id, a.trigger, a.status,
            None if a.passed is None else int(a.passed), a.message, iso(a.created_at), _ts(a.finished_at),
            a.global_score, _json(a.scores))


CHECK_COLS = ("assessment_id", "idx", "task_id", "type", "label", "passed", "message", "details",
              "duration", "created_at", "scores")
CHECK_SQL = _upsert("checks", CHECK_COLS, ("assessment_id", "idx"))

GATE_COLS = ("mission_id", "name", "status", "reason", "avg_score", "evaluated_at")
GATE_SQL = _upsert("gates", GATE_COLS, ("mission_id", "name"))

SOURCE_COLS = ("path", "hash", "outcome", "mission_id", "seen_at")
SOURCE_SQL = _upsert("sources", SOURCE_COLS, ("path",))

TRANSCRIPT_SQL = _upsert("transcripts", ("attempt_id", "task_id", "data"), ("attempt_id",))
REVIEW_COLS = ("assessment_id", "check_idx", "reviewer", "task_id", "model", "ok", "data", "created_at")
REVIEW_SQL = _upsert("reviews", REVIEW_COLS, ("assessment_id", "check_idx", "reviewer"))
DIMENSION_COLS = ("task_id", "check_idx", "source", "data", "created_at")
DIMENSION_SQL = _upsert("dimensions", DIMENSION_COLS, ("task_id", "check_idx"), insert_only=("data", "source"))
SLA_MARK_COLS = ("entity_id", "kind", "entity_type", "mission_id", "data", "created_at")
SLA_MARK_SQL = _upsert("sla_marks", SLA_MARK_COLS, ("entity_id", "kind"), insert_only=("data", "created_at"))

EVENT_SQL = "INSERT INTO events (seq, ts, event, mission_id, task_id, data) VALUES (?, ?, ?, ?, ?, ?)"


def event_row(ev: Event) -> Row:
    return (ev.seq, ev.ts, ev.event, ev.mission_id, ev.task_id, orjson.dumps(ev.data).decode())


COMMAND_DONE_SQL = "UPDATE commands SET status=?, result=?, handled_at=? WHERE id=?"
