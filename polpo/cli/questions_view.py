"""What ``polpo status`` and ``polpo show`` say about the questions agents asked and the tool calls that wait for a
person's approval (:mod:`polpo.store.questions_read`)."""

from __future__ import annotations

import json
from typing import Any

from polpo.cli.common import term

__all__ = ["question_lines", "waiting_lines"]

_WAITS = ("awaiting_answer", "awaiting_approval")


def _call(q: dict[str, Any]) -> str:
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False, default=str)[:120]}"
                     for k, v in (q.get("arguments") or {}).items())
    return f"{q['text']}({args})"


def waiting_lines(waiting: list[dict[str, Any]]) -> list[str]:
    """One line per question or tool call still waiting for a person, with the command that answers it."""
    out = []
    for q in waiting:
        what = (f"asks: {q['text']}" if q["kind"] == "question" else f"waits for approval of {_call(q)}")
        until = f" (until {q['expires_at']})" if q.get("expires_at") else ""
        out.append(f"  {term(q['task_id'])} {term(what)}{term(until)}\n    → {term(q['command'])}")
    return out


def question_lines(questions: list[dict[str, Any]], task_status: str) -> list[str]:
    """A task's questions and tool calls, each with what came back; one still asked of a task that no longer waits
    (its mission was cancelled) is withdrawn, as the leader's timer records it once its time is up."""
    out = []
    for q in questions:
        head = (f"  question ({q['source']}, attempt {q['attempt_id'].rpartition('/')[2]}) at {q['asked_at']}: "
                f"{q['text']}" if q["kind"] == "question" else
                f"  tool call awaiting approval at {q['asked_at']}: {_call(q)}")
        out.append(term(head))
        withdrawn = q["status"] == "withdrawn" or (q["status"] == "asked" and task_status not in _WAITS)
        if withdrawn:
            out.append("    withdrawn: its task stopped waiting for it")
        elif q["status"] == "asked":
            command = (f'polpo answer {q["task_id"]} "…"' if q["kind"] == "question" else
                       f"polpo approve {q['task_id']}  or  polpo reject {q['task_id']} --reason TEXT")
            out.append(term(f"    waiting for a person until {q['expires_at']}: {command}"))
        elif q["kind"] == "tool":
            verdict = "approved" if q.get("approved") else "refused"
            out.append(term(f"    {verdict} by {q['answered_by']} at {q['answered_at']}"
                            + (f": {q['answer']}" if q.get("answer") else "")))
        else:
            out.append(term(f"    answered by {q['answered_by']} at {q['answered_at']}: {q.get('answer') or ''}"))
    return out
