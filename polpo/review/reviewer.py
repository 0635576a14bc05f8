"""One G-Eval reviewer: phase 1 gathers evidence, phase 2 turns it into validated, cited scores. Never raises.

Before any reviewer runs, the panel has run what can be run (:mod:`polpo.review.evidence_run`: the task's
checks, the examples it states); every phase sees those results as numbered evidence items.

Phase 1 — evidence (:mod:`polpo.review.explore`). If the attempt changed files, the reviewer reads them (the
small ones are in its prompt with line numbers) and explores the workspace through the read-only tools, plus
``run_command`` in a throw-away copy of the work, for up to ``max_turns`` model calls; five turns before the end
it is told to wrap up, and the last turn is sent with ``tool_choice="none"`` so it has to write its analysis. If
the attempt changed no files, one tool-less call writes the analysis from the timeline and output.

Phase 2 — scoring (:mod:`polpo.review.scoring`): reasoning, then a score, per dimension, as JSON; each score is
the probability-weighted mean over the score tokens where the provider returns log-probabilities (G-Eval), and
must cite evidence (asked once when it does not). A ``checklist`` is answered as yes/no questions
(:mod:`polpo.review.checklist`), and the dimensions it covers are derived from the answers.

Everything sent to the model and stored in the trace goes through :func:`~polpo.llm.secrets.redact`; tool results
are cut at :data:`MODEL_TOOL_RESULT_MAX` characters for the model and :data:`TRACE_TOOL_RESULT_MAX` in the trace.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import anyio

from polpo.llm.client import ChatClient, LLMError, ModelSettings
from polpo.llm.secrets import redact
from polpo.review.checklist import answer_checklist, derive_scores
from polpo.review.consensus import DimScore, weighted_score
from polpo.review.context import (
    DEFAULT_MAX_TURNS,
    MODEL_TOOL_RESULT_MAX,
    REVIEW_TOOLS,
    TRACE_TOOL_RESULT_MAX,
    Question,
    ReviewContext,
    ReviewRun,
    Seat,
)
from polpo.review.dimensions import Dim, dim_key
from polpo.review.explore import analyse_output, explore
from polpo.review.scoring import score
from polpo.review.trace import ReviewerTrace
from polpo.review.work_files import read_work_files

__all__ = ["DEFAULT_MAX_TURNS", "MODEL_TOOL_RESULT_MAX", "REVIEW_TOOLS", "TRACE_TOOL_RESULT_MAX", "Question",
           "ReviewContext", "ReviewerTrace", "Seat", "run_reviewer"]


async def run_reviewer(client: ChatClient, settings: ModelSettings, *, index: int, ctx: ReviewContext,
                       dims: Sequence[Dim], max_turns: int = DEFAULT_MAX_TURNS,
                       time_limit: float | None = None, seat: Seat | None = None) -> ReviewerTrace:
    """Run one reviewer to the end (or to ``time_limit`` seconds). Never raises: failures are ``ok=False``.

    ``index`` is the reviewer's number in the panel (0, 1, 2; a re-run panel continues with 3, 4, 5).
    """
    seat = seat or Seat(read_work_files(ctx.workspace, ctx.files_changed))
    settings = seat.plan.settings(settings)
    trace = ReviewerTrace(index=index, model=settings.model, mode="files" if ctx.files_changed else "output",
                          seat=seat.plan.to_json())
    run = ReviewRun(client, settings, trace)
    try:
        with anyio.move_on_after(time_limit) as scope:
            await _review(run, ctx, list(dims), max(1, max_turns), seat)
        if scope.cancelled_caught:
            trace.ok = False
            trace.error = f"timed out after {time_limit:g} s" + (f" ({trace.error})" if trace.error else "")
            # the server answered its turns, so it is up: a call generating longer than a whole reply takes at
            # the speed they showed is runaway output (not re-run); short of that, the server was slow (waiting
            # may help: a loaded machine, slots shared with other requests)
            trace.error_kind = "runaway" if trace.turns and run.ran_away() else "time_limit"
        elif not trace.ok and trace.error_kind is None:
            trace.error_kind = "invalid"
    except LLMError as exc:
        trace.ok = False
        trace.error = f"{exc.kind}: {exc.message}"
        trace.error_kind = exc.kind
    except Exception as exc:  # a reviewer never takes the panel down
        trace.ok = False
        trace.error = redact(f"internal error: {type(exc).__name__}: {exc}")[:2000]
        trace.error_kind = "internal"
    finally:
        if seat.scratch is not None:
            seat.scratch.close()
    trace.duration = time.monotonic() - run.start
    return trace


def _redacted(score: DimScore) -> DimScore:
    evidence = json.loads(redact(json.dumps(score.evidence))) if score.evidence else []
    return DimScore(score.dimension, score.score, redact(score.reasoning), evidence, score.sampled, score.dist,
                    score.cited, score.from_questions)


async def _review(run: ReviewRun, ctx: ReviewContext, dims: list[Dim], max_turns: int, seat: Seat) -> None:
    trace = run.trace
    if not dims:
        raise ValueError("no dimensions to score")
    if trace.mode == "files":
        analysis = await explore(run, ctx, dims, max_turns, seat)
    else:
        analysis = await analyse_output(run, ctx, dims, seat)
    trace.analysis = analysis = redact(analysis)  # the model may quote a secret it read; nothing stores it raw
    if not analysis.strip():
        trace.error = "phase 1 produced no analysis"
        return
    asked = {dim_key(q.dimension) for q in ctx.checklist}  # matched as scores are: "Code quality" is code_quality
    answered = await answer_checklist(run, ctx, analysis, seat) if ctx.checklist else []
    if ctx.checklist and not answered:
        trace.error = "the checklist got no valid answers: " + " | ".join(trace.strategy_errors)
        return
    from_questions = derive_scores(dims, ctx.checklist, answered)
    rest = [d for d in dims if d.key not in asked]
    submission = await score(run, ctx, rest, analysis, seat) if rest else None
    if rest and submission is None:
        trace.error = "no valid scores: " + " | ".join(trace.strategy_errors)
        return
    by_name = {s.dimension: s for s in (submission.scores if submission else [])} | from_questions
    scores = [by_name[d.name] for d in dims]
    trace.scores = [_redacted(sc) for sc in scores]
    if submission is not None:
        trace.summary = redact(submission.summary)
        trace.suggestions = [redact(x) for x in submission.suggestions]
        trace.ignored_dimensions = submission.ignored
    trace.global_score = weighted_score([(s.score, d.weight) for s, d in zip(scores, dims, strict=True)])
    trace.ok = True
