"""Synchronous, read-mostly access for the CLI (status, show, commands) while a daemon runs.

WAL lets these readers work beside the daemon's single writer. The only write is queueing a command in
the ``commands`` inbox, which the daemon applies.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson


class NoState(Exception):
    pass


def connect(db_path: Path) -> sqlite3.Connection:
    if not db_path.exists():
        raise NoState(f"no state at {db_path} yet: start the daemon first (polpo daemon)")
    con = sqlite3.connect(db_path, timeout=5.0)
    con.row_factory = sqlite3.Row
    con.execute("PRAGMA busy_timeout=5000")
    return con


def _dict(row: sqlite3.Row | None, json_cols: tuple[str, ...] = ()) -> dict[str, Any] | None:
    if row is None:
        return None
    d = dict(row)
    for c in json_cols:
        if d.get(c):
            d[c] = orjson.loads(d[c])
    return d


def mission_count(con: sqlite3.Connection) -> int:
    return int(con.execute("SELECT COUNT(*) FROM missions").fetchone()[0])


def missions(con: sqlite3.Connection, *, include_finished: bool = True,
             limit: int | None = 200) -> list[dict[str, Any]]:
    """The newest ``limit`` missions (all if None), oldest first."""
    sql = ("SELECT m.id, m.name, m.status, m.source, m.run, m.created_at, m.finished_at, m.reason, "
           "(SELECT COUNT(*) FROM tasks t WHERE t.mission_id = m.id) AS total, "
           "(SELECT COUNT(*) FROM tasks t WHERE t.mission_id = m.id AND t.status = 'done') AS done, "
           "(SELECT COUNT(*) FROM tasks t WHERE t.mission_id = m.id AND t.status = 'failed') AS failed "
           "FROM missions m ")
    if not include_finished:
        sql += "WHERE m.status IN ('running', 'cancelling') "
    sql += "ORDER BY m.seq DESC LIMIT ?"
    return [dict(r) for r in con.execute(sql, (-1 if limit is None else limit,))][::-1]


def mission(con: sqlite3.Connection, mid: str) -> dict[str, Any] | None:
    row = con.execute("SELECT * FROM missions WHERE id = ?", (mid,)).fetchone()
    if row is None:
        row = con.execute("SELECT * FROM missions WHERE name = ? ORDER BY seq DESC LIMIT 1", (mid,)).fetchone()
    return _dict(row, ("report", "warnings"))


def tasks(con: sqlite3.Connection, mid: str) -> list[dict[str, Any]]:
    return [dict(r) for r in con.execute("SELECT * FROM tasks WHERE mission_id = ? ORDER BY idx", (mid,))]


def task(con: sqlite3.Connection, tid: str) -> dict[str, Any] | None:
    return _dict(con.execute("SELECT * FROM tasks WHERE id = ?", (tid,)).fetchone(), ("expectations",))


def attempts(con: sqlite3.Connection, tid: str, *, full: bool = False) -> list[dict[str, Any]]:
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


def assessments(con: sqlite3.Connection, attempt_id: str, *, full: bool = False) -> list[dict[str, Any]]:
    out = []
    for r in con.execute("SELECT * FROM assessments WHERE attempt_id = ? ORDER BY id", (attempt_id,)):
        a = _dict(r, ("scores",))
        assert a is not None
        a["checks"] = [_dict(c, ("scores",)) for c in con.execute(
            "SELECT idx, type, label, passed, message, details, duration, scores FROM checks "
            "WHERE assessment_id = ? ORDER BY idx", (a["id"],))]
        a["reviews"] = [_review(row, full) for row in con.execute(
            "SELECT check_idx, reviewer, model, ok, data FROM reviews WHERE assessment_id = ? "
            "ORDER BY check_idx, reviewer", (a["id"],))]
        out.append(a)
    return out


def _review(row: sqlite3.Row, full: bool) -> dict[str, Any]:
    data = orjson.loads(row["data"])
    if full:
        return {"check": row["check_idx"], **data}
    return {"check": row["check_idx"], "reviewer": row["reviewer"], "model": row["model"], "ok": bool(row["ok"]),
            "globalScore": data.get("globalScore"), "strategy": data.get("strategy"),
            "filesRead": data.get("filesRead"), "error": data.get("error"),
            "strategyErrors": data.get("strategyErrors"), "tokens": data.get("tokens"), "cost": data.get("cost")}


def transcript(con: sqlite3.Connection, attempt_id: str) -> list[dict[str, Any]] | None:
    row = con.execute("SELECT data FROM transcripts WHERE attempt_id = ?", (attempt_id,)).fetchone()
    return orjson.loads(row[0]) if row else None


def dimensions(con: sqlite3.Connection, tid: str) -> list[dict[str, Any]]:
    return [{"check": r["check_idx"], "source": r["source"], "dimensions": orjson.loads(r["data"])}
            for r in con.execute("SELECT * FROM dimensions WHERE task_id = ? ORDER BY check_idx", (tid,))]


def gates(con: sqlite3.Connection, mid: str) -> list[dict[str, Any]]:
    return [dict(r) for r in con.execute("SELECT * FROM gates WHERE mission_id = ? ORDER BY name", (mid,))]


def queue_command(con: sqlite3.Connection, kind: str, target: str, now: str) -> int:
    with con:
        cur = con.execute("INSERT INTO commands (kind, target, created_at) VALUES (?, ?, ?)", (kind, target, now))
    return int(cur.lastrowid or 0)


def command(con: sqlite3.Connection, cid: int) -> dict[str, Any] | None:
    return _dict(con.execute("SELECT * FROM commands WHERE id = ?", (cid,)).fetchone())
