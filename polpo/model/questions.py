"""What an agent asks of a person, and what comes back: questions, and tool calls that wait for approval.

An agent asks in two ways: an LLM agent calls ``ask_human`` (or a tool that ``approve_tools`` names), a command agent
exits 0 with output that is a question. Either way the attempt ends there and the question is stored with what the
agent needs to go on — an LLM agent's conversation up to the call (``snapshot``) — and the task waits
(``awaiting_answer``, or ``awaiting_approval`` for a tool call). The answer (a person's, a model's or a note when
nobody answered in time) is stored on the same row; the next attempt receives it — the LLM agent's conversation
goes on from the snapshot with the answer as the call's result, a command agent runs again with the answer in its
prompt — and the row records which attempt received it (``delivered_in``) and, for an approved call, its result, so
a restart never delivers it twice nor runs the call twice. Pure data and pure rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

__all__ = ["Ask", "Clarification", "Question", "QuestionKind", "QuestionStatus", "answer_source", "delivery_text",
           "looks_like_question", "resumes"]

QUESTION_MAX_CHARS = 2_000
"""Longer output is a report, not a question (Polpo's heuristic)."""


class QuestionKind(StrEnum):
    QUESTION = "question"  # an agent's question (ask_human, or a command agent's output)
    TOOL = "tool"  # a tool call waiting for a person's approval (approve_tools)


class QuestionStatus(StrEnum):
    ASKED = "asked"  # waiting for a person
    ANSWERED = "answered"  # answered, approved or refused: the task's next attempt receives it
    DELIVERED = "delivered"  # an attempt received it (delivered_in)
    WITHDRAWN = "withdrawn"  # its task stopped waiting for it otherwise (cancelled, failed by its SLA…)


@dataclass(frozen=True)
class Ask:
    """What an attempt that stopped to ask hands the engine."""

    kind: QuestionKind
    source: str  # ask_human | output | tool
    text: str  # the question; for a tool call, its name (server.tool)
    arguments: dict[str, Any] | None = None  # a tool call's arguments, as the person sees them
    snapshot: dict[str, Any] | None = None  # the LLM agent's conversation up to the call, to go on from


@dataclass(frozen=True)
class Clarification:
    """An answered question, as the task's later attempts get it."""

    question: str
    answer: str  # the answer itself (a command agent's $POLPO_ANSWER)
    told: str  # what the agent is told: the answer and who gave it (:func:`delivery_text`)


@dataclass
class Question:
    """One question or tool call awaiting approval, as stored (``questions`` table)."""

    id: str  # TASK/qN
    task_id: str
    mission_id: str
    attempt_id: str  # the attempt that asked
    kind: QuestionKind
    source: str
    text: str
    asked_at: datetime
    status: QuestionStatus = QuestionStatus.ASKED
    arguments: dict[str, Any] | None = None
    snapshot: dict[str, Any] | None = None
    expires_at: datetime | None = None
    answer: str | None = None  # the answer; a refused call's reason
    approved: bool | None = None  # a tool call: approved (True) or refused (False)
    answered_by: str | None = None  # a person's name, "model:MODEL", or "timeout"
    answered_at: datetime | None = None
    delivered_in: str | None = None  # the attempt that received it
    result: str | None = None  # an approved call's result, once it ran (never run twice)

    @property
    def open(self) -> bool:
        return self.status is QuestionStatus.ASKED


def answer_source(by: str | None) -> str:
    """Who answered: ``person``, ``model`` or ``timeout``."""
    if by == "timeout":
        return "timeout"
    return "model" if (by or "").startswith("model:") else "person"


def delivery_text(q: Question) -> str:
    """What the agent is told: the answer and who gave it, or the refusal of its call."""
    if q.kind is QuestionKind.TOOL:
        if q.approved:
            return f"approved by {q.answered_by}"
        return f"a person refused this call ({q.answered_by}): {q.answer or 'no reason given'}"
    source = answer_source(q.answered_by)
    if source == "timeout":
        return (f"{q.answer or 'Nobody answered in time.'} Decide yourself, with the best judgement you can, and go "
                "on; say in your summary what you assumed.")
    if source == "model":
        return (f"Nobody answered in time; a model ({q.answered_by[6:] if q.answered_by else '?'}) answered for "
                f"them: {q.answer}")
    return f"{q.answered_by} answered: {q.answer}"


def resumes(q: Question | None, last_attempt_id: str | None, last_interrupted: bool) -> bool:
    """Whether the task's next attempt goes on from ``q``'s snapshot: its answer is not received yet, or the
    attempt that received it was interrupted (a crash, a shutdown) before it ended."""
    if q is None or q.snapshot is None:
        return False
    if q.status is QuestionStatus.ANSWERED:
        return True
    return (q.status is QuestionStatus.DELIVERED and q.delivered_in is not None and q.delivered_in == last_attempt_id
            and last_interrupted)


def looks_like_question(output: str, files_changed: int) -> bool:
    """Polpo's heuristic for a command agent's output: short, a ``?`` in its last three lines that say something,
    and nothing changed in the workspace (an agent that did work and asks at the end is done, not waiting)."""
    text = output.strip()
    if not text or len(text) > QUESTION_MAX_CHARS or files_changed:
        return False
    return any("?" in line for line in [line for line in text.splitlines() if line.strip()][-3:])
