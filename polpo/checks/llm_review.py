"""``llm_review``: a panel of three LLM reviewers scores the work on weighted dimensions (G-Eval).

The panel itself is :mod:`polpo.review`. This check gives it the task, the attempt's evidence and the dimension
set — the mission's own, else generated once by the judge model and stored, else the defaults, and the same set
for every fix and retry of the task — and turns the consensus into a pass or a fail against ``threshold``.

A review the judge could not do — no reviewer produced scores (the endpoint is down, 5xx, timeouts, a refused
key), or the dimensions could not be generated because the judge is unreachable — is an **error** outcome, not a
fail: nothing is stored as the task's dimensions, and the engine retries the assessment instead of blaming the
agent. ``samples`` runs every reviewer that many times (spread, stability); ``dimensions[].examples`` are
scored anchors shown to the reviewers.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from polpo.checks.base import CheckContext, CheckOutcome, CheckType, Chosen, Correction, ReviewBackend
from polpo.checks.expectations import Dimension, Example, LlmReviewExpectation
from polpo.checks.review_inputs import checklist_dims, questions, read_examples, read_reference
from polpo.llm.client import OUTAGE_KINDS, ChatClient
from polpo.review.dimensions import Dim, choose, generate_dimensions_traced, needs_generation
from polpo.review.evidence import CheckEvidence
from polpo.review.pairwise import compare, work_digest
from polpo.review.panel import run_panel
from polpo.review.reviewer import ReviewContext
from polpo.tools.bounded_read import read_text_bounded

__all__ = ["NO_JUDGE", "Dimension", "Example", "LlmReview", "LlmReviewExpectation"]

NO_JUDGE = ("no LLM judge is configured, so this llm_review check cannot run: set [judge] model "
            "(or models) in the config, or POLPO_JUDGE_MODEL, and restart the daemon")
LABEL_CHARS = 60
MAX_THRESHOLD_DROP = 1.0  # the expectation judge may relax a threshold by at most this much
EXAMPLE_FILE_CHARS = 4000


def short(text: str, limit: int) -> str:
    """``text`` on one line within ``limit`` characters, cut at a word (never mid-word) with "…"."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ,;:.") + "…"


class _Outage(Exception):
    """The judge could not be reached while choosing the dimensions: nothing may be stored."""

    def __init__(self, reason: str, retryable: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v == v and abs(v) != float("inf")


class LlmReview(CheckType):
    type = "llm_review"
    rank = 2
    model = LlmReviewExpectation
    correctable = ("threshold",)
    needs_agent_success = True

    def label(self, exp: LlmReviewExpectation) -> str:
        return short(exp.text or "LLM review", LABEL_CHARS)

    def describe(self, exp: Mapping[str, Any]) -> str:
        return f"llm_review: {exp.get('criteria') or exp.get('prompt') or 'reviewed by LLM judges'}"

    async def run(self, exp: LlmReviewExpectation, ctx: CheckContext) -> CheckOutcome:
        backend = ctx.review
        if backend is None or not backend.judges:
            return CheckOutcome(self.type, self.label(exp), False, NO_JUDGE, error=NO_JUDGE, retryable=False)
        judge = backend.judges[0]

        qs = questions(exp.checklist)

        async def pick() -> Chosen:
            note = None
            generated = None
            if qs and not exp.dimensions:  # the checklist is the rubric: its dimensions are the ones it names
                return checklist_dims(qs), "checklist", None
            if needs_generation(exp.dimensions) and exp.text.strip():
                gen = await generate_dimensions_traced(backend.llm, judge, title=ctx.task_title,
                                                       description=ctx.task_description, criteria=exp.text)
                if gen.error_kind in OUTAGE_KINDS:
                    raise _Outage(f"the judge could not generate the dimensions: {gen.error}",
                                  gen.error_kind != "auth")
                generated = gen.dims
                if gen.error:
                    note = f"dimension generation failed ({gen.error[:200]}); using the default dimensions"
            dims, source = choose(exp.dimensions, generated)
            return dims, source, note

        try:
            dims, source, note = await backend.dimensions(ctx.index, pick)
        except _Outage as out:
            return CheckOutcome(self.type, self.label(exp), False, f"Review could not be done: {out.reason[:300]}",
                                out.reason, error=out.reason, retryable=out.retryable)
        anchors, anchor_note = read_examples(exp.examples, ctx.workspace)
        note = "; ".join(n for n in (note, anchor_note) if n) or None
        review_ctx = ReviewContext(title=ctx.task_title, description=ctx.task_description,
                                   criteria=_criteria(exp.text, ctx.expected_outcomes), workspace=ctx.workspace,
                                   files_changed=ctx.files_changed, timeline=ctx.timeline,
                                   attempt=ctx.attempt_number, checks=_check_evidence(ctx.prior),
                                   output=ctx.output or None, reference=read_reference(exp.reference, ctx.workspace),
                                   anchors=tuple(anchors), checklist=qs, clock=ctx.clock, env=dict(ctx.env))
        options = replace(backend.options, samples=exp.samples)
        result = await run_panel(backend.llm, list(backend.judges), review_ctx, _with_anchors(dims, ctx),
                                 exp.threshold, reviewer_timeout=backend.reviewer_timeout, options=options,
                                 client_for=_cache_of(backend))
        backend.keep_traces(ctx.index, result.reviewers, failed=result.error is not None)
        if result.error is not None:
            return CheckOutcome(self.type, self.label(exp), False, result.message, result.error,
                                error=result.error, retryable=result.retryable, tokens=result.tokens,
                                cost=result.cost, review=result.review_json())
        review = {**result.review_json(), "work": work_digest(ctx.workspace, ctx.files_changed, ctx.output,
                                                              result.evidence.summary())}
        if ctx.attempt_number > 1:  # a fix or retry: is it better than the attempt before? (both orders)
            previous = await backend.previous_review(ctx.index, ctx.attempt_number - 1)
            if previous and previous.get("work"):
                pair = await compare(backend.llm, judge, title=ctx.task_title, description=ctx.task_description,
                                     criteria=review_ctx.criteria, previous=previous["work"], current=review["work"],
                                     against=ctx.attempt_number - 1)
                review["pairwise"] = pair.to_json()
        details = result.details
        if not result.passed and result.feedback:
            details = f"{details}\n\n{result.feedback}" if details else result.feedback
        if note:
            details = f"{note}\n{details}"
        return CheckOutcome(self.type, self.label(exp), result.passed, result.message, details,
                            global_score=result.global_score, scores=[s.to_json() for s in result.scores],
                            dimension_source=source, tokens=result.tokens, cost=result.cost,
                            review=review,
                            undecided=result.decision_reason if result.decision == "person" else None)

    def correct(self, exp: Mapping[str, Any], field_name: str, value: Any, *, floor: float,
                known_files: Collection[str] | None) -> Correction | str:
        """Only relaxes: down by at most ``MAX_THRESHOLD_DROP``, never below ``floor`` (a larger drop is clamped)."""
        if not _is_number(value):
            return f"threshold {value!r} is not a number"
        old = exp.get("threshold", 3.0)
        if not _is_number(old):
            return "the current threshold is not a number"
        bound = max(floor, float(old) - MAX_THRESHOLD_DROP)
        if float(value) >= float(old):
            return f"threshold {value:g} does not relax {old:g} (only lowering is a correction)"
        if bound >= float(old):
            return (f"threshold {old:g} is already at the lowest allowed ({floor:g} floor, at most "
                    f"{MAX_THRESHOLD_DROP:g} lower)")
        clamped = round(max(float(value), bound), 4)
        note = (f"proposed {value:g}, clamped to {clamped:g} (never below {floor:g}, at most "
                f"{MAX_THRESHOLD_DROP:g} lower)") if clamped != float(value) else ""
        return Correction({**exp, "threshold": clamped}, old, clamped, note)


def _check_evidence(prior: Sequence[CheckOutcome]) -> tuple[CheckEvidence, ...]:
    """The checks that ran before the review, as the reviewers are shown them (not other reviews, not errors)."""
    return tuple(CheckEvidence(o.type, o.label, o.passed, o.message, o.details or "") for o in prior
                 if o.type != "llm_review" and o.error is None)


def _cache_of(backend: ReviewBackend) -> Callable[[int], ChatClient] | None:
    """A seat → client function for the judge-call cache, or None when it is off."""
    if backend.cached(0) is None:
        return None

    def client(seat: int) -> ChatClient:
        return backend.cached(seat) or backend.llm
    return client


def _criteria(text: str, expected: Sequence[Mapping[str, Any]]) -> str:
    """The review criteria, with the task's expected outcomes (what the attempt must deliver) appended."""
    if not expected:
        return text
    lines = [f"- {o.get('label')} ({o.get('type')}{', ' + str(o['path']) if o.get('path') else ''})"
             + (f": {o['description']}" if o.get("description") else "")
             + ("" if o.get("required", True) else " [optional]") for o in expected]
    return f"{text}\n\nExpected outcomes (deliverables the task must produce):\n" + "\n".join(lines)


def _with_anchors(dims: Sequence[Dim], ctx: CheckContext) -> list[Dim]:
    """The dimensions with each ``file`` example read from the workspace (cut, confined to it)."""
    if not any(e.get("file") for d in dims for e in d.examples):
        return list(dims)
    out = []
    for d in dims:
        examples = []
        for e in d.examples:
            if e.get("file") and not e.get("output"):  # bounded, and never blocked on a FIFO (it runs on the loop)
                read = read_text_bounded(ctx.workspace, str(e["file"]), EXAMPLE_FILE_CHARS)
                text = (f"(example file {e['file']} could not be read: it is not a text file in the workspace)"
                        if read is None else read[0])
                e = {**e, "output": text[:EXAMPLE_FILE_CHARS]}
            examples.append(e)
        out.append(replace(d, examples=tuple(examples)))
    return out
