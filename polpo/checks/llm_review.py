"""``llm_review``: a panel of three LLM reviewers scores the work on weighted dimensions (G-Eval).

The panel itself is :mod:`polpo.review`. This check gives it the task, the attempt's evidence and the dimension
set — the mission's own, else generated once by the judge model and stored, else the defaults, and the same set
for every fix and retry of the task — and turns the consensus into a pass or a fail against ``threshold``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Annotated, Any, Literal, Self

from pydantic import BeforeValidator, Field, model_validator

from polpo.checks.base import CheckContext, CheckOutcome, CheckType, Chosen, Correction
from polpo.docmodel import Confidence, Model, NonEmpty
from polpo.review.dimensions import choose, generate_dimensions_traced, needs_generation
from polpo.review.panel import run_panel
from polpo.review.reviewer import ReviewContext

__all__ = ["NO_JUDGE", "Dimension", "LlmReview", "LlmReviewExpectation"]

NO_JUDGE = ("no LLM judge is configured, so this llm_review check cannot pass: set [judge] model "
            "(or models) in the config, or POLPO_JUDGE_MODEL")
MAX_THRESHOLD_DROP = 1.0  # the expectation judge may relax a threshold by at most this much


def _check_rubric(v: object) -> object:
    """One clear message instead of pydantic's per-union-member errors."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, dict) and all(k in ("1", "2", "3", "4", "5") and isinstance(t, str) for k, t in v.items()):
        return v
    raise ValueError('a rubric is text or a map from "1".."5" to text')


class Dimension(Model):
    name: NonEmpty
    weight: float = Field(gt=0, le=1)
    description: str = ""
    rubric: Annotated[str | dict[Literal["1", "2", "3", "4", "5"], str] | None,
                      BeforeValidator(_check_rubric)] = None


class LlmReviewExpectation(Model):
    type: Literal["llm_review"]
    criteria: str | None = None
    prompt: str | None = None
    dimensions: list[Dimension] | None = None
    threshold: float = Field(3.0, ge=1, le=5)
    confidence: Confidence | None = None

    @model_validator(mode="after")
    def _something_to_judge(self) -> Self:
        if not (self.criteria or "").strip() and not (self.prompt or "").strip() and not self.dimensions:
            raise ValueError("an llm_review needs criteria, a prompt or dimensions")
        return self

    @property
    def text(self) -> str:
        return self.criteria or self.prompt or ""


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v == v and abs(v) != float("inf")


class LlmReview(CheckType):
    type = "llm_review"
    rank = 2
    model = LlmReviewExpectation
    correctable = ("threshold",)
    needs_agent_success = True

    def label(self, exp: LlmReviewExpectation) -> str:
        return (exp.text or "LLM review")[:60]

    def describe(self, exp: Mapping[str, Any]) -> str:
        return f"llm_review: {exp.get('criteria') or exp.get('prompt') or 'reviewed by LLM judges'}"

    async def run(self, exp: LlmReviewExpectation, ctx: CheckContext) -> CheckOutcome:
        backend = ctx.review
        if backend is None or not backend.judges:
            return CheckOutcome(self.type, self.label(exp), False, NO_JUDGE)
        judge = backend.judges[0]

        async def pick() -> Chosen:
            note = None
            generated = None
            if needs_generation(exp.dimensions) and exp.text.strip():
                gen = await generate_dimensions_traced(backend.llm, judge, title=ctx.task_title,
                                                       description=ctx.task_description, criteria=exp.text)
                generated = gen.dims
                if gen.error:
                    note = f"dimension generation failed ({gen.error[:200]}); using the default dimensions"
            dims, source = choose(exp.dimensions, generated)
            return dims, source, note

        dims, source, note = await backend.dimensions(ctx.index, pick)
        review_ctx = ReviewContext(title=ctx.task_title, description=ctx.task_description, criteria=exp.text,
                                   workspace=ctx.workspace, files_changed=ctx.files_changed, timeline=ctx.timeline,
                                   attempt=ctx.attempt_number)
        result = await run_panel(backend.llm, list(backend.judges), review_ctx, dims, exp.threshold,
                                 reviewer_timeout=backend.reviewer_timeout)
        backend.keep_traces(ctx.index, result.reviewers)
        details = result.details
        if not result.passed and result.feedback:
            details = f"{details}\n\n{result.feedback}" if details else result.feedback
        if note:
            details = f"{note}\n{details}"
        return CheckOutcome(self.type, self.label(exp), result.passed, result.message, details,
                            global_score=result.global_score, scores=[s.to_json() for s in result.scores],
                            dimension_source=source, tokens=result.tokens, cost=result.cost)

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
