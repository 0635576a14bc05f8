"""The review panel: three reviewers in parallel, median consensus, pass/fail and feedback for the agent.

A reviewer that fails (provider error, no valid scores, timeout, a bug) simply does not vote; it never aborts
the panel. With two or three votes the consensus is the robust median of
:mod:`~polpo.review.consensus`; with one, that reviewer's scores are used and ``single_reviewer`` is
set; with none, the whole panel runs once more (reviewer indices continue: 3, 4, 5) and, if that fails too,
the check fails with every reviewer's error in ``error``. That is an infrastructure failure, not a verdict on
the work, so ``feedback`` stays empty and the engine can tell the two apart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from polpo.llm.client import LLMClient, ModelSettings
from polpo.llm.secrets import redact
from polpo.review.consensus import Consensus, DimensionResult, Review, consensus
from polpo.review.dimensions import Dim
from polpo.review.reviewer import DEFAULT_MAX_TURNS, ReviewContext, ReviewerTrace, run_reviewer

__all__ = ["PanelResult", "ReviewContext", "feedback_text", "run_panel"]

MAX_SUGGESTIONS = 8
REASONING_IN_DETAILS = 300


@dataclass
class PanelResult:
    passed: bool
    global_score: float | None
    """None when no reviewer succeeded."""
    threshold: float
    scores: list[DimensionResult]
    reviewers: list[ReviewerTrace]
    """Every reviewer that ran, failed ones and a re-run's included, in index order."""
    single_reviewer: bool = False
    rerun: bool = False
    error: str | None = None
    feedback: str = ""
    """For the agent's fix attempt: the failed dimensions with scores, reasoning, evidence and suggestions."""
    summary: str = ""
    unscored: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(r.tokens for r in self.reviewers)

    @property
    def cost(self) -> float | None:
        costs = [r.cost for r in self.reviewers if r.cost is not None]
        return math.fsum(costs) if costs else None

    @property
    def message(self) -> str:
        """One line for the check row and events."""
        if self.global_score is None:
            return f"Review failed: no reviewer produced valid scores ({len(self.reviewers)} tried)"
        verdict = "" if self.passed else " — below threshold"
        single = " (a single reviewer succeeded)" if self.single_reviewer else ""
        head = f"Score {self.global_score:.2f}/5 (threshold {self.threshold:g}){verdict}{single}"
        return head + (f": {self.summary[:100]}" if self.summary else "")

    @property
    def details(self) -> str:
        """Per-dimension lines for the check row."""
        if self.global_score is None:
            return self.error or ""
        lines = [f"Global score: {self.global_score:.2f}/5 (threshold: {self.threshold:g})"]
        for s in self.scores:
            votes = ", ".join(f"{v['score']:g}" + ("" if v["kept"] else " (outlier)") for v in s.reviewer_scores)
            lines.append(f"{s.dimension}: {s.score:g}/5 (weight: {s.weight:g}; votes: {votes}) — "
                         f"{_cut(s.reasoning, REASONING_IN_DETAILS)}")
        if self.unscored:
            lines.append("Not scored by any reviewer: " + ", ".join(self.unscored))
        if self.summary:
            lines.append(f"Summary: {self.summary}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed, "globalScore": self.global_score, "threshold": self.threshold,
            "scores": [s.to_json() for s in self.scores], "reviewers": [r.to_json() for r in self.reviewers],
            "singleReviewer": self.single_reviewer, "rerun": self.rerun, "error": self.error,
            "feedback": self.feedback, "summary": self.summary, "unscored": list(self.unscored),
            "tokens": self.tokens, "cost": self.cost,
        }


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def _round(client: LLMClient, models: Sequence[ModelSettings], ctx: ReviewContext, dims: Sequence[Dim],
                 offset: int, max_turns: int, reviewer_timeout: float | None) -> list[ReviewerTrace]:
    traces: list[ReviewerTrace | None] = [None] * len(models)

    async def one(i: int, settings: ModelSettings) -> None:
        index = offset + i
        try:
            traces[i] = await run_reviewer(client, settings, index=index, ctx=ctx, dims=dims,
                                           max_turns=max_turns, time_limit=reviewer_timeout)
        except Exception as exc:  # run_reviewer does not raise; this keeps a future bug from killing the group
            traces[i] = ReviewerTrace(index=index, model=settings.model,
                                      error=redact(f"internal error: {type(exc).__name__}: {exc}")[:2000])

    async with anyio.create_task_group() as tg:
        for i, settings in enumerate(models):
            tg.start_soon(one, i, settings)
    return [t for t in traces if t is not None]


def _summary(c: Consensus, ok: list[ReviewerTrace]) -> str:
    """The summary of the reviewer whose own score is nearest the consensus (lowest index on a tie)."""
    used = [r for r in ok if r.index in c.reviewers and r.summary]
    if not used:
        return ""
    best = min(used, key=lambda r: (abs((r.global_score or 0.0) - c.global_score), r.index))
    return best.summary


def _suggestions(ok: list[ReviewerTrace]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for r in ok:
        for s in r.suggestions:
            key = " ".join(s.lower().split())
            if key and key not in seen:
                seen.add(key)
                out.append(s.strip())
    return out[:MAX_SUGGESTIONS]


def feedback_text(c: Consensus, suggestions: Sequence[str], summary: str) -> str:
    """What the agent needs to raise the score: the dimensions below the threshold first, with the reasons."""
    lines = [f"The LLM review scored the work {c.global_score:.2f}/5; it needs {c.threshold:g} to pass."]
    low = sorted((s for s in c.scores if s.score < c.threshold), key=lambda s: (s.score, -s.weight))
    if low:
        lines.append(f"Dimensions below {c.threshold:g}:")
        for s in low:
            lines.append(f"- {s.dimension}: {s.score:g}/5 (weight {s.weight:g})")
            if s.reasoning:
                lines.append(f"  Why: {_cut(s.reasoning, 1200)}")
            for e in s.evidence[:6]:
                where = str(e.get("file") or "")
                if where and e.get("line") is not None:
                    where += f":{e['line']}"
                note = str(e.get("note") or "")
                lines.append(f"  Evidence: {where + ' — ' if where else ''}{_cut(note, 300)}")
    if c.unscored:
        lines.append("Not scored by any reviewer: " + ", ".join(c.unscored))
    if suggestions:
        lines.append("Suggestions:")
        lines.extend(f"- {_cut(s, 400)}" for s in suggestions)
    if summary:
        lines.append(f"Reviewer summary: {_cut(summary, 800)}")
    return "\n".join(lines)


async def run_panel(client: LLMClient, models: Sequence[ModelSettings], ctx: ReviewContext, dims: Sequence[Dim],
                    threshold: float, *, max_turns: int = DEFAULT_MAX_TURNS,
                    reviewer_timeout: float | None = None) -> PanelResult:
    """Run the panel (one reviewer per entry of ``models``, normally 3) and decide. Never raises on model errors.

    ``reviewer_timeout`` bounds each reviewer's whole run in seconds (None: only the client's per-request
    timeout applies).
    """
    if not models:
        raise ValueError("run_panel needs at least one reviewer model")
    dims = list(dims)
    traces = await _round(client, models, ctx, dims, 0, max_turns, reviewer_timeout)
    rerun = False
    if not any(t.ok for t in traces):
        rerun = True
        traces += await _round(client, models, ctx, dims, len(models), max_turns, reviewer_timeout)
    ok = [t for t in traces if t.ok]
    c = consensus([Review(t.index, t.scores) for t in ok], dims, threshold)
    if c is None:
        errors = "; ".join(f"reviewer {t.index} ({t.model}): {t.error or 'no result'}" for t in traces)
        return PanelResult(passed=False, global_score=None, threshold=threshold, scores=[], reviewers=traces,
                           rerun=rerun, error=f"all reviewers failed, twice: {errors}")
    summary = _summary(c, ok)
    feedback = "" if c.passed else feedback_text(c, _suggestions(ok), summary)
    return PanelResult(passed=c.passed, global_score=c.global_score, threshold=threshold, scores=c.scores,
                       reviewers=traces, single_reviewer=c.single_reviewer, rerun=rerun, feedback=feedback,
                       summary=summary, unscored=c.unscored)
