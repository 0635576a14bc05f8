"""Synchronous, read-mostly access for the CLI (status, show, commands) while a daemon runs.

WAL lets these readers work beside the daemon's single writer. The only write is queueing a command in
the ``commands`` inbox, which the daemon applies. The queries are written once, with ``?`` placeholders, against
:class:`Conn`: a ``sqlite3.Connection``, or for a PostgreSQL store the small adapter in ``postgres_read.py``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import orjson

if TYPE_CHECKING:
    from polpo.config_paths import Located


class NoState(Exception):
    pass


class Unreachable(NoState):
    """The configured PostgreSQL store cannot be reached (the message never holds the password)."""


class Unavailable(Unreachable):
    """The PostgreSQL server is stopped, restarting or unreachable for now (an outage): a read may try again."""


class Rows(Protocol):
    def __iter__(self) -> Iterator[Any]: ...

    def fetchone(self) -> Any: ...


class Conn(Protocol):
    """What the CLI's queries need from a connection; ``sqlite3.Connection`` is one."""

    def execute(self, sql: str, params: Any = ..., /) -> Rows: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None,
                 /) -> Any: ...

    def close(self) -> None: ...


def open_reader(cfg: Located, *, threads: bool = False) -> Conn:
    """The state the config names: the SQLite file in the state folder, or the ``[store] url`` database.

    ``threads``: the connection may be used from a thread other than the one that opened it (one at a time,
    as :class:`polpo.store.readers.ReaderPool` hands it out).
    """
    if cfg.store.url is None:
        return connect(cfg.db_path, threads=threads)
    from polpo.extras import MissingExtra, require

    try:
        require("postgres", "[store] url")
    except MissingExtra as e:
        raise Unreachable(str(e)) from None
    from polpo.store import postgres_read
    from polpo.store.errors import StoreError, StoreUnavailable

    try:
        return postgres_read.connect(cfg.store)
    except LookupError as e:
        raise NoState(str(e)) from None
    except StoreUnavailable as e:
        raise Unavailable(str(e)) from None
    except StoreError as e:
        raise Unreachable(str(e)) from None


def connect(db_path: Path, *, threads: bool = False) -> sqlite3.Connection:
    if not db_path.exists():
        raise NoState(f"no state at {db_path} yet: start the daemon first (polpo daemon)")
    con = sqlite3.connect(db_path, timeout=5.0, check_same_thread=not threads)
    con.row_factory = sqlite3.Row
    con.execute("PRAGMA busy_timeout=5000")
    return con


def _dict(row: Any, json_cols: tuple[str, ...] = ()) -> dict[str, Any] | None:
    if row is None:
        return None
    d = dict(row)
    for c in json_cols:
        if d.get(c):
            d[c] = orjson.loads(d[c])
    return d


def nodes(con: Conn) -> list[dict[str, Any]]:
    """The daemons sharing a PostgreSQL store: name, host, pid and seconds since their last heartbeat."""
    sql = ("SELECT name, host, pid, EXTRACT(EPOCH FROM clock_timestamp() - heartbeat_at)::float AS age "
           "FROM nodes ORDER BY name")
    return [dict(r) for r in con.execute(sql)]


def mission(con: Conn, mid: str) -> dict[str, Any] | None:
    row = con.execute("SELECT * FROM missions WHERE id = ?", (mid,)).fetchone()
    if row is None:
        row = con.execute("SELECT * FROM missions WHERE name = ? ORDER BY seq DESC LIMIT 1", (mid,)).fetchone()
    return _dict(row, ("report", "warnings"))


def tasks(con: Conn, mid: str) -> list[dict[str, Any]]:
    """A mission's tasks in file order, each with ``attempt_kind``: the kind of its latest attempt (or None)."""
    keys, rows = task_rows(con, mid)
    return [dict(zip(keys, r, strict=True)) for r in rows]


def task_rows(con: Conn, mid: str) -> tuple[list[str], list[Any]]:
    """:func:`tasks` as (column names, rows): 10 000 rows turn into dicts faster by ``zip`` than one by one."""
    rows = list(con.execute(
        "SELECT t.*, a.kind AS attempt_kind FROM tasks t "
        "LEFT JOIN attempts a ON a.task_id = t.id AND a.number = t.attempts "
        "WHERE t.mission_id = ? ORDER BY t.idx", (mid,)))
    return (list(rows[0].keys()) if rows else []), rows


def task(con: Conn, tid: str) -> dict[str, Any] | None:
    return _dict(con.execute("SELECT * FROM tasks WHERE id = ?", (tid,)).fetchone(), ("expectations",))


def task_spec(con: Conn, tid: str) -> dict[str, Any]:
    """The task as its mission file wrote it (description, expectations, tiers …); {} when unknown."""
    row = con.execute("SELECT m.spec, t.idx FROM tasks t JOIN missions m ON m.id = t.mission_id WHERE t.id = ?",
                      (tid,)).fetchone()
    if row is None:
        return {}
    tasks = orjson.loads(row[0]).get("tasks") or []
    spec = tasks[row[1]] if row[1] < len(tasks) else {}
    return spec if isinstance(spec, dict) else {}


def attempts(con: Conn, tid: str, *, full: bool = False) -> list[dict[str, Any]]:
    """A task's attempts with their assessments; ``full`` adds transcripts and every reviewer's whole trace."""
    out = []
    for r in con.execute("SELECT * FROM attempts WHERE task_id = ? ORDER BY number", (tid,)):
        a = _dict(r, ("files", "outcomes"))
        assert a is not None
        a["assessments"] = assessments(con, a["id"], full=full)
        if full:
            row = con.execute("SELECT data FROM transcripts WHERE attempt_id = ?", (a["id"],)).fetchone()
            a["transcript"] = orjson.loads(row[0]) if row else None
            judge = con.execute("SELECT data FROM reviews WHERE assessment_id = ?",
                                (f"{a['id']}/judge",)).fetchone()
            a["expectationJudge"] = orjson.loads(judge[0]) if judge else None
        out.append(a)
    return out


TIMELINE_MAX = 2000  # attempts a mission's timeline shows (the newest)


def timeline(con: Conn, mid: str) -> list[dict[str, Any]]:
    """A mission's attempts in start order (the newest :data:`TIMELINE_MAX`): which task ran when, on which node,
    with which outcome."""
    rows = [dict(r) for r in con.execute(
        "SELECT task_id, number, kind, agent, status, verdict, started_at, finished_at, node, exit_code, error "
        "FROM attempts WHERE mission_id = ? ORDER BY started_at DESC, id DESC LIMIT ?", (mid, TIMELINE_MAX))]
    return rows[::-1]


def assessments(con: Conn, attempt_id: str, *, full: bool = False) -> list[dict[str, Any]]:
    out = []
    for r in con.execute("SELECT * FROM assessments WHERE attempt_id = ? ORDER BY id", (attempt_id,)):
        a = _dict(r, ("scores",))
        assert a is not None
        a["checks"] = [_dict(c, ("scores",)) for c in con.execute(
            "SELECT idx, type, label, passed, message, details, duration, scores FROM checks "
            "WHERE assessment_id = ? ORDER BY idx", (a["id"],))]
        a["reviews"] = _reviews(con, a["id"], full)
        a["failedReviews"] = _reviews(con, f"{a['id']}/error", full)  # the latest try that ended in an error
        out.append(a)
    return out


def _reviews(con: Conn, key: str, full: bool) -> list[dict[str, Any]]:
    return [_review(row, full) for row in con.execute(
        "SELECT check_idx, reviewer, model, ok, data FROM reviews WHERE assessment_id = ? "
        "ORDER BY check_idx, reviewer", (key,))]


def _review(row: Any, full: bool) -> dict[str, Any]:
    data = orjson.loads(row["data"])
    if full:
        return {"check": row["check_idx"], **data}
    return {"check": row["check_idx"], "reviewer": row["reviewer"], "model": row["model"], "ok": bool(row["ok"]),
            "globalScore": data.get("globalScore"), "strategy": data.get("strategy"),
            "filesRead": data.get("filesRead"), "error": data.get("error"),
            "strategyErrors": data.get("strategyErrors"), "tokens": data.get("tokens"), "cost": data.get("cost"),
            "cacheHits": data.get("cacheHits")}


def transcript(con: Conn, attempt_id: str) -> list[dict[str, Any]] | None:
    row = con.execute("SELECT data FROM transcripts WHERE attempt_id = ?", (attempt_id,)).fetchone()
    return orjson.loads(row[0]) if row else None


def dimensions(con: Conn, tid: str) -> list[dict[str, Any]]:
    return [{"check": r["check_idx"], "source": r["source"], "dimensions": orjson.loads(r["data"])}
            for r in con.execute("SELECT * FROM dimensions WHERE task_id = ? ORDER BY check_idx", (tid,))]


def override(con: Conn, tid: str) -> dict[str, Any] | None:
    """A person's verdict on a task over the judge's (polpo.engine.overrides), or None."""
    return _dict(con.execute("SELECT * FROM overrides WHERE task_id = ?", (tid,)).fetchone())


def overrides_for_labels(con: Conn, mission: str | None = None) -> list[dict[str, Any]]:
    """Every override (or one mission's) with what a label needs: the task's place in its mission's spec, the
    mission's workspace, the judged attempt's latest assessment scores and the judge models that reviewed it."""
    rows = [dict(r) for r in con.execute(
        "SELECT o.*, t.idx, t.title, m.spec, m.workspace FROM overrides o JOIN tasks t ON t.id = o.task_id "
        "JOIN missions m ON m.id = o.mission_id WHERE (? IS NULL OR o.mission_id = ?) ORDER BY o.created_at, o.task_id",
        (mission, mission))]
    for r in rows:
        a = con.execute("SELECT id, scores FROM assessments WHERE attempt_id = ? ORDER BY id DESC LIMIT 1",
                        (r["attempt_id"],)).fetchone()
        r["judge_scores"] = orjson.loads(a["scores"]) if a is not None and a["scores"] else None
        r["judge_models"] = sorted({m[0] for m in con.execute(
            "SELECT DISTINCT model FROM reviews WHERE assessment_id = ?", (a["id"],))}) if a is not None else []
        r["dimensions"] = dimensions(con, r["task_id"])
    return rows


def holds(con: Conn, mid: str) -> list[dict[str, Any]]:
    """A mission's checkpoints, delays and approvals once reached or started (polpo.engine.holds)."""
    return [dict(r) for r in con.execute("SELECT * FROM holds WHERE mission_id = ? ORDER BY kind, name", (mid,))]


def gates(con: Conn, mid: str) -> list[dict[str, Any]]:
    return [dict(r) for r in con.execute("SELECT * FROM gates WHERE mission_id = ? ORDER BY name", (mid,))]


def source(con: Conn, path: str) -> dict[str, Any] | None:
    """What the daemon last made of a mission file's bytes: {path, hash, outcome, mission_id, seen_at}."""
    return _dict(con.execute("SELECT * FROM sources WHERE path = ?", (path,)).fetchone())


def events(con: Conn, after: int, *, mission: str | None = None, limit: int = 500,
           ) -> list[tuple[int, str, str, str | None, str | None, str, str | None]]:
    """Up to ``limit`` stored events after ``seq``, oldest first: (seq, ts, event, missionId, taskId, data JSON,
    node)."""
    where = "seq > ?" + (" AND mission_id = ?" if mission is not None else "")
    args: tuple[Any, ...] = (after, mission, limit) if mission is not None else (after, limit)
    return [(int(r[0]), str(r[1]), str(r[2]), r[3], r[4], str(r[5]), r[6]) for r in con.execute(
        f"SELECT seq, ts, event, mission_id, task_id, data, node FROM events WHERE {where} ORDER BY seq LIMIT ?",
        args)]


def last_event_seq(con: Conn) -> int:
    row = con.execute("SELECT MAX(seq) FROM events").fetchone()
    return int(row[0] or 0) if row is not None else 0


def ping(con: Conn) -> None:
    """A trivial query: raises when the store cannot answer."""
    con.execute("SELECT 1").fetchone()


def latest_reviews(con: Conn, task_id: str, check_idx: int) -> list[dict[str, Any]]:
    """The reviewer traces of the latest panel that ran a task's review check: [{reviewer, model, ok, at, data}]."""
    rows = list(con.execute(
        "SELECT assessment_id, reviewer, model, ok, data, created_at FROM reviews WHERE task_id = ? AND check_idx = ? "
        "ORDER BY created_at, assessment_id, reviewer", (task_id, check_idx)))
    if not rows:
        return []
    last = rows[-1][0]
    return [{"reviewer": r[1], "model": r[2], "ok": bool(r[3]), "data": orjson.loads(r[4]), "at": r[5]}
            for r in rows if r[0] == last]


def queue_command(con: Conn, kind: str, target: str, now: str) -> int:
    with con:
        row = con.execute("INSERT INTO commands (kind, target, created_at) VALUES (?, ?, ?) RETURNING id",
                          (kind, target, now)).fetchone()
    return int(row[0])


def command(con: Conn, cid: int) -> dict[str, Any] | None:
    return _dict(con.execute("SELECT * FROM commands WHERE id = ?", (cid,)).fetchone())


# ------------------------------------------------------------------------------------ metrics rows

@dataclass(frozen=True)
class TaskRow:
    id: str
    mission_id: str
    title: str
    agent: str
    retries: int
    total_fixes: int
    status: str = ""


@dataclass(frozen=True)
class AssessmentRow:
    task_id: str
    mission_id: str
    agent: str  # the agent of the assessed attempt
    passed: bool
    global_score: float | None
    scores: Sequence[dict[str, Any]] = ()


@dataclass(frozen=True)
class AttemptRow:
    task_id: str
    mission_id: str
    agent: str
    kind: str  # initial | fix | retry


@dataclass(frozen=True)
class MarkRow:
    entity_id: str
    entity_type: str
    mission_id: str
    kind: str  # met | violated (warnings are not deadline outcomes)


@dataclass(frozen=True)
class ReviewRow:
    """One llm_review check's judge-call cache use (from its stored panel summary)."""

    task_id: str
    mission_id: str
    hits: int
    misses: int


@dataclass
class Snapshot:
    tasks: list[TaskRow]
    assessments: list[AssessmentRow]
    attempts: list[AttemptRow]
    marks: list[MarkRow]
    mission_order: list[str]  # acceptance order
    reviews: list[ReviewRow] = field(default_factory=list)
    spend: dict[str, dict[str, Any]] = field(default_factory=dict)  # task id -> its spend tally (polpo.model.spend)


def metrics_snapshot(con: Conn, *, mission: str | None = None) -> Snapshot:
    """The rows metrics need, optionally of one mission (by id); read-only."""
    where, args = ("WHERE t.mission_id = ?", (mission,)) if mission is not None else ("", ())
    tasks = [TaskRow(r[0], r[1], r[2], r[3], r[4] or 0, r[5] or 0, r[6]) for r in con.execute(
        f"SELECT t.id, t.mission_id, t.title, t.agent, t.retries, t.total_fixes, t.status FROM tasks t {where} "
        "ORDER BY t.mission_id, t.idx", args)]
    assessments = [AssessmentRow(r[0], r[1], r[2], bool(r[3]), r[4], _scores(r[5])) for r in con.execute(
        "SELECT a.task_id, t.mission_id, COALESCE(at.agent, t.agent), a.passed, a.global_score, a.scores "
        "FROM assessments a JOIN tasks t ON t.id = a.task_id LEFT JOIN attempts at ON at.id = a.attempt_id "
        f"{where} {'AND' if where else 'WHERE'} a.status = 'complete' ORDER BY a.created_at, a.id", args)]
    attempts = [AttemptRow(*r) for r in con.execute(
        "SELECT at.task_id, at.mission_id, at.agent, at.kind FROM attempts at "
        + ("WHERE at.mission_id = ?" if mission is not None else ""), args)]
    marks = [MarkRow(*r) for r in con.execute(
        "SELECT entity_id, entity_type, mission_id, kind FROM sla_marks WHERE kind IN ('met', 'violated') "
        + ("AND mission_id = ?" if mission is not None else ""), args)]
    order = [r[0] for r in con.execute(
        "SELECT id FROM missions " + ("WHERE id = ? " if mission is not None else "") + "ORDER BY seq", args)]
    reviews = [ReviewRow(r[0], r[1], *_cache_use(r[2])) for r in con.execute(
        "SELECT c.task_id, t.mission_id, c.scores FROM checks c JOIN tasks t ON t.id = c.task_id "
        f"{where} {'AND' if where else 'WHERE'} c.type = 'llm_review'", args)]
    return Snapshot(tasks, assessments, attempts, marks, order, reviews)


def _cache_use(text: str | None) -> tuple[int, int]:
    """(hits, misses) of the judge-call cache recorded in a review check's stored summary."""
    try:
        cache = ((orjson.loads(text) if text else {}).get("review") or {}).get("cache") or {}
        return int(cache.get("hits") or 0), int(cache.get("misses") or 0)
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
        return 0, 0


def _scores(text: str | None) -> list[dict[str, Any]]:
    if not text:
        return []
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        return []
    return [s for s in data if isinstance(s, dict)] if isinstance(data, list) else []
