"""What agents asked of people, read for the CLI, the API and the web view (``polpo status``, ``polpo show``,
``GET /api/tasks/{id}``, the mission page): a task's questions, and every question still waiting for a person.

:func:`waiting` is the read an "attention" list (what waits for a person) plugs in: each open question or tool call
whose task still waits for it, with what a person needs to act — the question or the call and its arguments, who
asked, since when, until when, and the command that answers it. The agent's conversation (``snapshot``) is never
read here: it is the engine's, and large.
"""

from __future__ import annotations

from typing import Any

import orjson

from polpo.store.read import Conn

__all__ = ["COLUMNS", "task_questions", "waiting"]

COLUMNS = ("q.id, q.task_id, q.mission_id, q.attempt_id, q.kind, q.source, q.text, q.arguments, q.status, "
           "q.asked_at, q.expires_at, q.answer, q.approved, q.answered_by, q.answered_at, q.delivered_in")


def _row(r: Any) -> dict[str, Any]:
    d = dict(r)
    d["arguments"] = orjson.loads(d["arguments"]) if d.get("arguments") else None
    if d.get("approved") is not None:
        d["approved"] = bool(d["approved"])
    return d


def task_questions(con: Conn, task_id: str) -> list[dict[str, Any]]:
    """The task's questions and tool calls that waited for approval, oldest first."""
    return [_row(r) for r in con.execute(f"SELECT {COLUMNS} FROM questions q WHERE q.task_id = ? "
                                         "ORDER BY q.asked_at, q.id", (task_id,))]


def waiting(con: Conn, mission_id: str | None = None) -> list[dict[str, Any]]:
    """Every question and tool call still waiting for a person (of one mission, or all), oldest first, with its
    task's title, its agent and ``command``: what answers it (a tool call: ``polpo approve`` or ``reject``)."""
    where = " AND q.mission_id = ?" if mission_id is not None else ""
    rows = con.execute(
        f"SELECT {COLUMNS}, t.title, t.agent FROM questions q JOIN tasks t ON t.id = q.task_id "
        "WHERE q.status = 'asked' AND ((q.kind = 'question' AND t.status = 'awaiting_answer') OR "
        f"(q.kind = 'tool' AND t.status = 'awaiting_approval')){where} ORDER BY q.asked_at, q.id",
        (mission_id,) if mission_id is not None else ())
    out = []
    for r in rows:
        d = _row(r)
        d["command"] = (f'polpo answer {d["task_id"]} "…"' if d["kind"] == "question" else
                        f"polpo approve {d['task_id']}  (or: polpo reject {d['task_id']} --reason TEXT)")
        out.append(d)
    return out
