"""The engine's side of an ``llm_review`` check: judges from the config, stored dimensions, stored traces.

The panel itself (:mod:`polpo.assessment.review`) knows nothing of the store. This module gives it the judges'
model settings, the task's dimension set (generated once, stored, reused on every fix and retry so each attempt
is measured with the same yardstick), the attempt's evidence, and stores every reviewer's trace.
"""

from __future__ import annotations

from typing import Any

import orjson

from polpo.agents.transcript import timeline_text
from polpo.assessment.review.dimensions import (
    Dim,
    choose,
    dims_from_json,
    dims_to_json,
    generate_dimensions_traced,
    needs_generation,
)
from polpo.assessment.review.panel import run_panel
from polpo.assessment.review.reviewer import ReviewContext
from polpo.clock import Clock
from polpo.config import Config
from polpo.llm.client import LLMClient, ModelSettings
from polpo.llm.secrets import redact
from polpo.mission.schema import LlmReviewExpectation
from polpo.model.records import Assessment, Attempt, Mission, Task
from polpo.store.protocol import Store

NO_JUDGE = ("no LLM judge is configured, so this llm_review check cannot pass: set [judge] model "
            "(or models) in the config, or POLPO_JUDGE_MODEL")
TIMELINE_CHARS = 12_000


def judge_settings(cfg: Config) -> list[ModelSettings]:
    """One ModelSettings per reviewer (three), or [] when no judge is configured."""
    j = cfg.judge
    return [ModelSettings(model=m, api_base=j.api_base, api_key_env=j.api_key_env, temperature=j.temperature,
                          timeout=cfg.llm.request_timeout.total_seconds()) for m in j.panel_models()]


def evidence(attempt: Attempt) -> tuple[list[str], str]:
    """(files the attempt created or edited, execution timeline as text) for the reviewers."""
    files = attempt.files or {}
    changed = sorted({*files.get("created", []), *files.get("modified", [])})
    parts: list[str] = []
    if attempt.transcript:
        parts.append(timeline_text(attempt.transcript, TIMELINE_CHARS))
    state = ("timed out" if attempt.timed_out else f"error: {attempt.error}" if attempt.error
             else f"exit code {attempt.exit_code}")
    parts.append(f"Agent {attempt.agent} ({attempt.model or 'command'}), attempt {attempt.number}: {state}, "
                 f"{attempt.duration or 0:.1f} s")
    if attempt.stdout_tail.strip():
        parts.append("stdout (end):\n" + attempt.stdout_tail[-4000:])
    if attempt.stderr_tail.strip():
        parts.append("stderr (end):\n" + attempt.stderr_tail[-2000:])
    if attempt.outcomes:
        parts.append("Declared outcomes:\n" + "\n".join(
            f"- {o.get('type')}: {o.get('label')}: {o.get('value') or o.get('path') or ''}" for o in attempt.outcomes))
    if files.get("deleted"):
        parts.append("Files deleted: " + ", ".join(files["deleted"]))
    return changed, "\n\n".join(parts)


class Reviews:
    """The engine's side of ``llm_review`` checks: settings, stored dimensions and traces around the panel."""

    def __init__(self, cfg: Config, store: Store, clock: Clock, llm: LLMClient) -> None:
        self.cfg = cfg
        self.store = store
        self.clock = clock
        self.llm = llm

    async def task_dimensions(self, task: Task, idx: int, exp: LlmReviewExpectation,
                              judge: ModelSettings) -> tuple[list[Dim], str, str | None]:
        """(dims, source, note): the stored set if there is one, else chosen (and generated) now and stored."""
        stored = await self.store.task_dimensions(task.id, idx)
        if stored is not None:
            return dims_from_json(stored[1]), stored[0], None
        note = None
        generated = None
        criteria = exp.criteria or exp.prompt or ""
        if needs_generation(exp) and criteria.strip():
            gen = await generate_dimensions_traced(self.llm, judge, title=task.title,
                                                   description=task.spec.description, criteria=criteria)
            generated = gen.dims
            if gen.error:
                note = f"dimension generation failed ({gen.error[:200]}); using the default dimensions"
        dims, source = choose(exp, generated)
        await self.store.commit(self.store.tx().dimensions(task.id, idx, source,
                                                           orjson.dumps(dims_to_json(dims)).decode(),
                                                           self.clock.now()))
        return dims, source, note

    async def review(self, m: Mission, task: Task, attempt: Attempt, assessment: Assessment, idx: int,
                     exp: LlmReviewExpectation) -> dict[str, Any]:
        """Run the panel for check ``idx``; returns the check row as the pipeline stores it."""
        judges = judge_settings(self.cfg)
        if not judges:
            return {"passed": False, "message": NO_JUDGE, "details": None}
        dims, source, note = await self.task_dimensions(task, idx, exp, judges[0])
        changed, timeline = evidence(attempt)
        ctx = ReviewContext(title=task.title, description=task.spec.description,
                            criteria=exp.criteria or exp.prompt or "", workspace=m.workspace,
                            files_changed=changed, timeline=timeline, attempt=attempt.number)
        result = await run_panel(self.llm, judges, ctx, dims, exp.threshold,
                                 reviewer_timeout=self.cfg.judge.reviewer_timeout.total_seconds())
        now = self.clock.now()
        tx = self.store.tx()
        for trace in result.reviewers:
            tx.review(assessment.id, idx, trace.index, task.id, trace.model, trace.ok,
                      redact(orjson.dumps(trace.to_json()).decode()), now)
        self.store.submit(tx)
        details = result.details
        if not result.passed and result.feedback:
            details = f"{details}\n\n{result.feedback}" if details else result.feedback
        if note:
            details = f"{note}\n{details}"
        scores = [s.to_json() for s in result.scores]  # votes, which were kept, whose reasoning
        return {"passed": result.passed, "message": result.message, "details": details,
                "globalScore": result.global_score, "scores": scores, "dimensionSource": source,
                "tokens": result.tokens, "cost": result.cost}
