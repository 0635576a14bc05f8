"""A checklist: yes/no questions that score the dimensions they belong to.

Small models answer a binary question about the work far better than they place it on a 1–5 scale. A
``checklist`` in an ``llm_review`` lists such questions (yes is good), each for a dimension (its own, given, or
``checklist``) with a weight. The reviewer answers them after its analysis, one JSON object; each answer's
``P(yes)`` is read from the answer token's log-probabilities where the provider gives them (else 1 or 0), and a
dimension's score is ``1 + 4 · Σ w·P(yes) / Σ w`` over its questions (:func:`derive_scores`, pure). A dimension
with questions is scored by them alone; the others are scored on the 1–5 scale as usual.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from polpo.llm.logprobs import TOP_LOGPROBS
from polpo.llm.secrets import redact
from polpo.review import score_prompts
from polpo.review.citations import cites
from polpo.review.consensus import DimScore
from polpo.review.context import Question, ReviewContext, ReviewRun, Seat
from polpo.review.dimensions import Dim, dim_key
from polpo.review.geval import answer_distributions
from polpo.review.parsing import JSONNotFound, extract_json

__all__ = ["Answer", "answer_checklist", "derive_scores", "parse_answers"]

Answer = dict[str, Any]
"""``{question, dimension, answer, pYes, evidence}`` — one per question, in the checklist's order."""


class _AnswerIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    question: int = Field(ge=1)
    answer: bool
    evidence: str = ""

    @field_validator("question", mode="before")
    @classmethod
    def _number(cls, v: object) -> object:
        return int(v[1:]) if isinstance(v, str) and v[:1] in "Qq" and v[1:].isdigit() else v

    @field_validator("answer", mode="before")
    @classmethod
    def _yes_no(cls, v: object) -> object:
        if isinstance(v, str) and v.strip().lower() in ("yes", "no"):
            return v.strip().lower() == "yes"
        raise ValueError("must be yes or no")

    @field_validator("evidence", mode="before")
    @classmethod
    def _text(cls, v: object) -> object:
        return "" if v is None else str(v)


def parse_answers(data: object, questions: Sequence[Question]) -> list[tuple[int, bool, str]]:
    """``(question index, yes?, evidence)`` per question, in order; ValueError when one is missing or bad. Pure."""
    items = data.get("answers") if isinstance(data, Mapping) else None
    if not isinstance(items, list):
        raise ValueError('the reply has no "answers" list')
    found: dict[int, tuple[bool, str]] = {}
    for raw in items:
        try:
            a = _AnswerIn.model_validate(raw)
        except ValidationError as exc:
            raise ValueError(f"answers: {exc.errors()[0]['msg']}") from None
        if a.question <= len(questions):
            found.setdefault(a.question, (a.answer, a.evidence))
    missing = [str(i) for i in range(1, len(questions) + 1) if i not in found]
    if missing:
        raise ValueError("no answer for question(s) " + ", ".join(missing))
    return [(i - 1, *found[i]) for i in range(1, len(questions) + 1)]


def written_answers(data: object) -> list[tuple[int | None, bool]]:
    """Every answer entry in the order the model wrote it: its question number (None when unreadable) and
    whether it said yes — to find each answer's token in the reply (:func:`polpo.review.geval.answer_distributions`
    reads them in that order, not the questions')."""
    items = data.get("answers") if isinstance(data, Mapping) else None
    out: list[tuple[int | None, bool]] = []
    for raw in items if isinstance(items, list) else []:
        try:
            a = _AnswerIn.model_validate(raw)
            out.append((a.question, a.answer))
        except ValidationError:
            out.append((None, False))
    return out


async def answer_checklist(run: ReviewRun, ctx: ReviewContext, analysis: str, seat: Seat) -> list[Answer]:
    """The questions answered (empty when no valid answer came, with the errors in the trace)."""
    questions = list(ctx.checklist)
    convo: list[dict[str, Any]] = [
        {"role": "system", "content": score_prompts.CHECKLIST_SYSTEM},
        {"role": "user", "content": redact(score_prompts.checklist_user(
            analysis=analysis, evidence=seat.evidence_text(), questions=[q.text for q in questions]))},
    ]
    for m in convo:
        run.record(2, m, strategy="checklist")
    for attempt in (1, 2):
        reply = await run.chat(convo, logprobs=TOP_LOGPROBS if seat.logprobs else None)
        run.record(2, reply.as_message(), strategy="checklist")
        try:
            data = extract_json(reply.content, kind="object")
            parsed = parse_answers(data, questions)
        except (ValueError, JSONNotFound) as exc:
            run.trace.strategy_errors.append(f"checklist: {exc}")
            if attempt == 1:
                convo += [reply.as_message(), {"role": "user", "content": f"That answer was rejected: {exc}. "
                                               "Answer every question again, yes or no, as the JSON asked for."}]
            continue
        written = written_answers(data)
        p_of: dict[int, float] = {}  # question number → P(yes) of its first answer, read where it was written
        for (number, _), p in zip(written, answer_distributions(reply.logprobs, [y for _, y in written]),
                                  strict=True):
            if number is not None and p is not None:
                p_of.setdefault(number, p)
        answers = [{"question": questions[i].text, "dimension": questions[i].dimension,
                    "answer": "yes" if yes else "no", "pYes": p_of.get(i + 1, 1.0 if yes else 0.0),
                    "fromLogprobs": i + 1 in p_of, "evidence": redact(ev)[:500],
                    "cited": cites(ev, evidence_ids={e.id for e in seat.evidence.items}, files=ctx.files_changed,
                                   output=ctx.timeline + (ctx.output or ""))}
                   for i, yes, ev in parsed]
        run.trace.checklist = answers
        return answers
    return []


def derive_scores(dims: Sequence[Dim], questions: Sequence[Question], answers: Sequence[Answer],
                  ) -> dict[str, DimScore]:
    """The score of each dimension that has questions, from their answers (``1 + 4·weighted P(yes)``). Pure."""
    if not answers:
        return {}
    out: dict[str, DimScore] = {}
    for d in dims:
        mine = [(q, a) for q, a in zip(questions, answers, strict=True) if dim_key(q.dimension) == d.key]
        if not mine:
            continue
        total = math.fsum(q.weight for q, _ in mine)
        p = math.fsum(q.weight * float(a["pYes"]) for q, a in mine) / total if total > 0 else 0.0
        reasoning = "; ".join(f"{a['question']} — {a['answer']}" + (f" ({a['evidence']})" if a["evidence"] else "")
                              for _, a in mine)
        out[d.name] = DimScore(d.name, round(1 + 4 * p, 4), reasoning, [], cited=any(a.get("cited") for _, a in mine),
                               from_questions=[dict(a) for _, a in mine])
    return out
