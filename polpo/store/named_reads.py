"""The daemon's named reads (:class:`polpo.store.protocol.Store`), written once for every backend.

Each read is a :class:`Select` declared once: its SQL text (with ``?`` for SQLite or ``$1, $2, …`` for
PostgreSQL, as :mod:`polpo.store.sql` does for writes) and the same filter, order and projection over the memory
store's dictionaries. A backend implements only :meth:`NamedReads._select`; turning rows into records is here,
so the three backends cannot drift apart (they were three copies by hand).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from polpo.checks.base import CheckOutcome
from polpo.events.catalog import Event
from polpo.model.questions import Question
from polpo.model.records import Assessment, Mission
from polpo.model.schedule import Schedule, ScheduleStatus
from polpo.model.spend import AttemptSpend
from polpo.model.status import GateStatus
from polpo.store import rows as R
from polpo.store.protocol import CommandRecord, LoadedMission, SourceRecord
from polpo.store.sql import marks

__all__ = ["NamedReads", "Select"]

Rec = Mapping[str, Any]


def _of_mission(task_id: Any, mission_id: Any) -> bool:
    """A task id ``MISSION:N`` belongs to ``mission_id`` (polpo.engine.admission makes them so)."""
    return bool(str(task_id).rpartition(":")[0] == mission_id)


def _before(value: Any, bound: Any) -> bool:
    """SQL's ``value < bound``: NULL is never less than anything."""
    return value is not None and bool(value < bound)


def _among(value: Any, values: Any) -> bool:
    return value in values


_OPS: dict[str, Callable[[Any, Any], bool]] = {"=": operator.eq, ">": operator.gt, "<": _before, "of": _of_mission,
                                              "in": _among}


@dataclass(frozen=True)
class Select:
    """``SELECT cols FROM table WHERE <where> AND col IN (constants) ORDER BY order [DESC] [LIMIT ?]``."""

    table: str
    cols: tuple[str, ...] = ()  # () = every column
    # ``"column"`` (= ?), ``"column >"`` (> ?), ``"column <"`` (< ?, NULL never), ``"column in"`` (one of the
    # list ?) or ``"task_id of"`` (a task of mission ?), the arguments in order
    where: tuple[str, ...] = ()
    among: tuple[tuple[str, tuple[str, ...]], ...] = ()  # each ``column IN (constants)``
    order: tuple[str, ...] = ()
    desc: bool = False
    limit: bool = False  # LIMIT ?: the last argument
    quick: bool = False
    """A read an index answers with a few rows (one by its key; the command inbox's poll): a backend may read it in
    place (SQLite, on the loop) rather than hop to a thread. It is on a dropped file's path, or polled all the time
    (an idle daemon must not wake a thread several times a second for it); a read in WAL mode never waits for a
    lock."""

    def sql(self, ph: str) -> str:
        """The text, with ``?`` placeholders (SQLite) or ``$1, $2, …`` (``ph="$"``, PostgreSQL)."""
        return _sql(self, ph)

    def apply(self, rows: Iterable[Rec], args: Sequence[Any]) -> list[Rec]:
        """The same read over in-memory rows (dictionaries of the table's columns)."""
        conds = [(c, _OPS[op or "="], set(v) if op == "in" else v) for (c, _, op), v in
                 zip((w.partition(" ") for w in self.where), args, strict=False)]
        found = [r for r in rows if all(test(r[c], v) for c, test, v in conds)
                 and all(r[c] in values for c, values in self.among)]
        if self.order:
            found.sort(key=lambda r: tuple(r[c] for c in self.order), reverse=self.desc)
        if self.limit:
            found = found[:args[-1]]
        return [{c: r[c] for c in self.cols} for r in found] if self.cols else found


@functools.cache
def _sql(q: Select, ph: str) -> str:
    places = marks(len(q.where) + q.limit, ph)
    conds = [_cond(c, op, m, ph) for (c, _, op), m in zip((w.partition(" ") for w in q.where), places, strict=False)]
    conds += [f"{c} IN ({', '.join(repr(v) for v in values)})" for c, values in q.among]
    text = f"SELECT {', '.join(q.cols) or '*'} FROM {q.table}"
    if conds:
        text += f" WHERE {' AND '.join(conds)}"
    if q.order:
        text += f" ORDER BY {', '.join(f'{c} DESC' if q.desc else c for c in q.order)}"
    return text + (f" LIMIT {places[-1]}" if q.limit else "")


def _cond(c: str, op: str, m: str, ph: str) -> str:
    if op == "of":
        return f"{c} IN (SELECT id FROM tasks WHERE mission_id = {m})"
    if op == "in":  # one list argument: a JSON array for SQLite (see NamedReads.sql_args), an array for PostgreSQL
        return f"{c} = ANY({m})" if ph == "$" else f"{c} IN (SELECT value FROM json_each({m}))"
    return f"{c} {op or '='} {m}"


SOURCE_COLS = ("path", "hash", "outcome", "mission_id", "runs", "stamp")
SOURCE = Select("sources", SOURCE_COLS, ("path",), quick=True)
SOURCES_AT = Select("sources", SOURCE_COLS, ("path in",))
MISSION_ID = Select("missions", ("id",), ("id",), quick=True)
LAST_MISSION = Select("missions", ("seq",), order=("seq",), desc=True, limit=True)
OPEN_MISSIONS = Select("missions", ("id",), among=(("status", ("running", "cancelling")),), order=("seq",))
MISSION = Select("missions", where=("id",))
GATES = Select("gates", ("name", "status"), ("mission_id",))
HOLDS = Select("holds", where=("mission_id",))
SCHEDULES = Select("schedules", among=(("status", tuple(s.value for s in ScheduleStatus
                                                        if s is not ScheduleStatus.REMOVED)),), order=("id",))
TASKS = Select("tasks", where=("mission_id",), order=("idx",))
ATTEMPTS = Select("attempts", where=("mission_id",), order=("task_id", "number"))
REVIEW_SPEND = Select("reviews", ("assessment_id", "check_idx", "reviewer", "task_id", "model", "tokens_in",
                                  "tokens_out", "cost", "created_at"), ("task_id of",))
# not decided yet: running, or undecided (the judge could not tell; a person's verdict completes it)
OPEN_ASSESSMENT = Select("assessments", where=("attempt_id",), among=(("status", ("running", "undecided")),),
                         order=("id",), desc=True, limit=True)
CHECKS = Select("checks", where=("assessment_id",), order=("idx",))
DONE_ASSESSMENT = Select("assessments", where=("attempt_id",), among=(("status", ("complete",)),), order=("id",),
                         desc=True, limit=True)
SLA_MARKS = Select("sla_marks", ("entity_id", "kind"), ("mission_id",))
DIMENSIONS = Select("dimensions", ("source", "data"), ("task_id", "check_idx"))
BASELINES = Select("baselines", ("check_idx", "value"), ("task_id",))
QUEUED_COMMANDS = Select("commands", ("id", "kind", "target"), among=(("status", ("queued",)),), order=("id",),
                         quick=True)  # polled: a partial index holds only the queued ones
ATTEMPT_SPEND = Select("attempts", ("id", "task_id", "kind", "agent", "model", "tokens", "tokens_in", "tokens_out",
                                    "cost", "finished_at"), ("task_id",))
TASK_ATTEMPTS = Select("attempts", ("id", "number", "kind"), ("task_id",), order=("number",))
TASK_ASSESSMENTS = Select("assessments", ("attempt_id", "status", "global_score"), ("task_id",), order=("id",))
TASK_REVIEW_SPEND = Select("reviews", REVIEW_SPEND.cols, ("task_id",))
SPEND_OF_DAY = Select("spend", where=("period",))  # the agents' and the daemon's accounts of a UTC day
SPEND_OF_MISSION = Select("spend", where=("mission_id",))  # a mission's account and its tasks'
TASK_QUESTIONS = Select("questions", where=("task_id",), order=("asked_at", "id"))
DUE_QUESTIONS = Select("questions", ("id", "task_id", "mission_id", "kind"), ("expires_at <",),
                       among=(("status", ("asked",)),), order=("id",), quick=True)  # polled, by status's index
EVENTS_AFTER = Select("events", R.EVENTS.cols, ("seq >",), order=("seq",))
EVENTS_PAGE = Select("events", R.EVENTS.cols, ("seq >",), order=("seq",), limit=True)


class NamedReads:
    """The named reads of the store protocol over one primitive, :meth:`_select`."""

    async def _select(self, q: Select, *args: Any) -> Sequence[Rec]:
        raise NotImplementedError

    async def source(self, path: str) -> SourceRecord | None:
        rows = await self._select(SOURCE, path)
        return R.source_from_row(rows[0]) if rows else None

    async def sources_at(self, paths: Sequence[str]) -> list[SourceRecord]:
        return [R.source_from_row(r) for r in await self._select(SOURCES_AT, list(paths))] if paths else []

    async def mission_exists(self, mission_id: str) -> bool:
        return bool(await self._select(MISSION_ID, mission_id))

    async def last_mission_seq(self) -> int:
        rows = await self._select(LAST_MISSION, 1)
        return int(rows[0]["seq"]) if rows else 0

    async def open_mission_ids(self) -> list[str]:
        return [r["id"] for r in await self._select(OPEN_MISSIONS)]

    async def load_mission(self, mission_id: str) -> LoadedMission | None:
        rows = await self._select(MISSION, mission_id)
        if not rows:
            return None
        m = R.mission_from_row(rows[0])
        for g in await self._select(GATES, mission_id):
            m.gate_state[g["name"]] = GateStatus(g["status"])
        for h in await self._select(HOLDS, mission_id):
            hold = R.hold_from_row(h)
            m.holds[(hold.kind, hold.name)] = hold
        for t in await self._select(TASKS, mission_id):
            task = R.task_from_row(t, m)
            m.tasks[task.id] = task
        loaded = LoadedMission(m)
        for a in await self._select(ATTEMPTS, mission_id):  # the latest of each task's attempts stays
            loaded.attempts[a["task_id"]] = attempt = R.attempt_from_row(a)
            R.keep_spend(m, attempt)  # what the mission spent, for its report after a restart
        for r in await self._select(REVIEW_SPEND, mission_id):
            m.spent.add_review_row(r)
        return loaded

    async def read_task_spend(self, m: Mission, task_id: str) -> None:
        """What every attempt and review of ``task_id`` spent, whichever node ran it, onto ``m.spent`` (the
        report's spend, on the node that completes the mission)."""
        for a in await self._select(ATTEMPT_SPEND, task_id):
            spent = AttemptSpend.of(a["task_id"], a["kind"], a["agent"], a["model"], a["tokens"], a["tokens_in"],
                                    a["tokens_out"], a["cost"], a["finished_at"])
            if spent is not None:
                m.spent.attempts[a["id"]] = spent
        for r in await self._select(TASK_REVIEW_SPEND, task_id):
            m.spent.add_review_row(r)

    async def task_scores(self, task_id: str) -> list[tuple[int, str, float | None]]:
        """``(attempt number, kind, score)`` of each of the task's attempts, oldest first: the score of its last
        complete assessment (None: none, or no review scored it)."""
        scores: dict[str, float | None] = {}
        for r in await self._select(TASK_ASSESSMENTS, task_id):
            if r["status"] == "complete":
                scores[r["attempt_id"]] = r["global_score"]
        return [(a["number"], a["kind"], scores.get(a["id"])) for a in await self._select(TASK_ATTEMPTS, task_id)]

    async def open_assessment(self, attempt_id: str) -> Assessment | None:
        rows = await self._select(OPEN_ASSESSMENT, attempt_id, 1)
        if not rows:
            return None
        return R.assessment_from_row(rows[0], await self._select(CHECKS, rows[0]["id"]))

    async def last_check(self, attempt_id: str, check_idx: int) -> CheckOutcome | None:
        """Check ``check_idx`` of the attempt's last complete assessment (a ``CheckOutcome``), or None: what a
        later attempt's review compares itself with."""
        rows = await self._select(DONE_ASSESSMENT, attempt_id, 1)
        if not rows:
            return None
        found = R.assessment_from_row(rows[0], await self._select(CHECKS, rows[0]["id"]))
        return next((c for c in found.checks if c.index == check_idx), None)

    async def sla_marks(self, mission_id: str) -> list[tuple[str, str]]:
        return [(r["entity_id"], r["kind"]) for r in await self._select(SLA_MARKS, mission_id)]

    async def spend_rows(self, period: str) -> list[dict[str, Any]]:
        """The day's accounts and the open missions' (two reads: a Select has no OR), each row once."""
        found = {(r["scope"], r["key"], r["period"]): dict(r) for r in await self._select(SPEND_OF_DAY, period)}
        for mission_id in await self.open_mission_ids():
            for r in await self._select(SPEND_OF_MISSION, mission_id):
                found.setdefault((r["scope"], r["key"], r["period"]), dict(r))
        return list(found.values())

    async def spend_now(self, mission_id: str | None, period: str | None) -> list[dict[str, Any]]:
        """What a turn's budgets read before it starts: the accounts of ``mission_id`` (its own and its tasks'),
        and of the day ``period`` (the agents' and the daemon's), as every node counted them."""
        rows = [] if mission_id is None else await self._select(SPEND_OF_MISSION, mission_id)
        return [dict(r) for r in rows] + ([] if period is None else
                                          [dict(r) for r in await self._select(SPEND_OF_DAY, period)])

    async def task_dimensions(self, task_id: str, check_idx: int) -> tuple[str, Any] | None:
        rows = await self._select(DIMENSIONS, task_id, check_idx)
        return (rows[0]["source"], orjson.loads(rows[0]["data"])) if rows else None

    async def task_baselines(self, task_id: str) -> dict[int, float]:
        return {r["check_idx"]: r["value"] for r in await self._select(BASELINES, task_id)}

    async def task_questions(self, task_id: str) -> list[Question]:
        """The task's questions and tool calls that waited for approval, oldest first."""
        return [R.question_from_row(r) for r in await self._select(TASK_QUESTIONS, task_id)]

    async def due_questions(self, now: str) -> list[tuple[str, str, str, str]]:
        """``(id, task_id, mission_id, kind)`` of the questions still asked whose expiry is before ``now`` (ISO)."""
        return [(r["id"], r["task_id"], r["mission_id"], r["kind"]) for r in await self._select(DUE_QUESTIONS, now)]

    async def queued_commands(self) -> list[CommandRecord]:
        return [CommandRecord(r["id"], r["kind"], r["target"]) for r in await self._select(QUEUED_COMMANDS)]

    async def schedules(self) -> list[Schedule]:
        return [R.schedule_from_row(r) for r in await self._select(SCHEDULES)]

    async def events_after(self, seq: int, limit: int | None = None) -> list[Event]:
        """The stored events after ``seq``, oldest first (at most ``limit``)."""
        rows = await (self._select(EVENTS_AFTER, seq) if limit is None else self._select(EVENTS_PAGE, seq, limit))
        return [Event(r["seq"], r["ts"], r["event"], r["mission_id"], r["task_id"], orjson.loads(r["data"]),
                      node=r["node"]) for r in rows]
