"""The rows of ``polpo rejudge``: the reviewed checks of a task's attempts, read with what a review needs, and the
reviews run again, written beside the originals (``rejudgements``) by the CLI process. Plain SQL on a reader
connection (:func:`polpo.store.read.open_reader`), for SQLite and PostgreSQL alike."""

from __future__ import annotations

from typing import Any

import orjson

from polpo.store.read import Conn, _dict

__all__ = ["add_rejudgement", "rejudgements", "reviewed_checks"]


def reviewed_checks(con: Conn, tid: str, *, every_attempt: bool = False) -> list[dict[str, Any]]:
    """The ``llm_review`` checks of a task's assessed attempts (the latest one, or every one), with their stored
    review: ``{attempt_id, number, idx, passed, scores (the review JSON), details}``, and the checks that ran
    before each (``prior``)."""
    out: list[dict[str, Any]] = []
    for a in con.execute("SELECT id, number, stdout_tail, files FROM attempts WHERE task_id = ? "
                         "ORDER BY number DESC", (tid,)):
        row = con.execute("SELECT id FROM assessments WHERE attempt_id = ? AND status IN ('complete', 'undecided') "
                          "ORDER BY id DESC LIMIT 1", (a["id"],)).fetchone()
        if row is None:
            continue
        checks = [_dict(c, ("scores",)) for c in con.execute(
            "SELECT idx, type, label, passed, message, details, scores FROM checks WHERE assessment_id = ? "
            "ORDER BY idx", (row["id"],))]
        reviews = [c for c in checks if c is not None and c["type"] == "llm_review"]
        for c in reviews:
            files = orjson.loads(a["files"]) if a["files"] else {}
            out.append({"attempt_id": a["id"], "number": a["number"], "output": a["stdout_tail"] or "",
                        "files": sorted({*files.get("created", []), *files.get("modified", [])}), **c,
                        "prior": [p for p in checks if p is not None and p["type"] != "llm_review"]})
        if reviews and not every_attempt:
            break
    return out


def add_rejudgement(con: Conn, row: tuple[Any, ...]) -> int:
    """Store a review run again (``rejudgements``: task, attempt, check, set-up, passed, decision, score, the
    verdict then, its score, what was judged, the review JSON, when); the original is never touched."""
    with con:
        found = con.execute(
            "INSERT INTO rejudgements (task_id, attempt_id, check_idx, setup, passed, decision, global_score, "
            "was_passed, was_score, source, data, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "RETURNING id", row).fetchone()
    return int(found[0])


def rejudgements(con: Conn, tid: str) -> list[dict[str, Any]]:
    """A task's reviews run again under other judges, oldest first (the review JSON left out)."""
    return [dict(r) for r in con.execute(
        "SELECT id, attempt_id, check_idx, setup, passed, decision, global_score, was_passed, was_score, source, "
        "created_at FROM rejudgements WHERE task_id = ? ORDER BY id", (tid,))]


def mission_and_task(con: Conn, tid: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The raw rows of a task and its mission (what :func:`polpo.store.rows.mission_from_row` reads), or None."""
    task = con.execute("SELECT * FROM tasks WHERE id = ?", (tid,)).fetchone()
    if task is None:
        return None
    mission = con.execute("SELECT * FROM missions WHERE id = ?", (task["mission_id"],)).fetchone()
    return (dict(mission), dict(task)) if mission is not None else None


def task_ids(con: Conn, target: str) -> list[str]:
    """``target`` if it is a task, else the tasks of the mission ``target`` (in order); [] when neither."""
    if con.execute("SELECT 1 FROM tasks WHERE id = ?", (target,)).fetchone() is not None:
        return [target]
    return [r[0] for r in con.execute("SELECT id FROM tasks WHERE mission_id = ? ORDER BY idx", (target,))]
