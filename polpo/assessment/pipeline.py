"""Assessment of one attempt: expectations in rank order, cheapest first, each result stored as it completes.

Each expectation is run by its registered check type (:mod:`polpo.checks.registry`), which gives its rank:
files, then commands, then LLM reviews. A check that needs a successful agent (the review panel) is skipped
when the agent failed or a cheaper check failed: no API calls are spent on work that is known to be wrong, and
the feedback names the check that failed. A resumed assessment (after a restart) skips checks whose result is
already stored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import TypeAdapter

from polpo.assessment.evidence import changed_files, evidence
from polpo.assessment.judge import judge_expectations
from polpo.assessment.review_backend import AssessmentReviews, judge_settings
from polpo.checks.base import CheckContext, CheckOutcome
from polpo.checks.registry import Expectation, check_for
from polpo.clock import Clock
from polpo.config import Config
from polpo.events.catalog import (
    AssessmentComplete,
    AssessmentCorrected,
    AssessmentJudged,
    AssessmentStarted,
    CheckComplete,
    CheckStarted,
)
from polpo.llm.client import LLMClient
from polpo.model.records import Assessment, Attempt, Mission, Task
from polpo.model.status import AssessmentStatus, AttemptKind
from polpo.store.protocol import Store
from polpo.tools.marks import attempt_env

__all__ = ["Assessor", "Verdict", "combine_scores", "expectations_of", "ordered"]

_EXPECTATION: TypeAdapter[Any] = TypeAdapter(Expectation)


@dataclass(frozen=True)
class Verdict:
    passed: bool
    checks: list[CheckOutcome]
    message: str


def ordered(expectations: Sequence[Any]) -> list[tuple[int, Any]]:
    """(original index, expectation) sorted cheapest first, file order within a rank."""
    return sorted(enumerate(expectations), key=lambda p: (check_for(p[1].type).rank, p[0]))


def expectations_of(task: Task) -> list[Any]:
    """The task's expectations: the judge-corrected ones when there are, else the mission file's."""
    if task.expectations is not None:
        return [_EXPECTATION.validate_python(e) for e in task.expectations]
    return list(task.spec.expectations)


class Assessor:
    """Runs a task's checks against an attempt and stores every result; the review panel is one of them."""

    def __init__(self, cfg: Config, store: Store, clock: Clock, llm: LLMClient,
                 workspace_of: Callable[[Mission, Task], Path] | None = None) -> None:
        self.cfg = cfg
        self.store = store
        self.clock = clock
        self.llm = llm
        self.workspace_of = workspace_of  # where a task's checks run: its own worktree when it is isolated

    def _context(self, m: Mission, task: Task, attempt: Attempt, assessment: Assessment) -> CheckContext:
        files, timeline = evidence(attempt)
        reviews = AssessmentReviews(self.cfg, self.store, self.clock, self.llm, task_id=task.id,
                                    assessment_id=assessment.id)
        return CheckContext(workspace=self.workspace_of(m, task) if self.workspace_of else m.workspace,
                            clock=self.clock,
                            check_timeout=self.cfg.defaults.check_timeout.total_seconds(), task_title=task.title,
                            task_description=task.spec.description, attempt_number=attempt.number,
                            agent_ok=attempt.agent_ok, files_changed=files, timeline=timeline,
                            env=attempt_env(self.cfg.state_dir, attempt.id), review=reviews)

    async def assess(self, m: Mission, task: Task, attempt: Attempt, assessment: Assessment) -> Verdict:
        store = self.store
        exps = expectations_of(task)
        total = len(exps)
        done = {c.index: c for c in assessment.checks}
        results: list[CheckOutcome] = []
        skipped: list[str] = []
        ids: dict[str, Any] = {"mission_id": m.id, "task_id": task.id}
        ctx = self._context(m, task, attempt, assessment)
        for idx, exp in ordered(exps):
            if idx in done:
                results.append(done[idx])
                continue
            check = check_for(exp.type)
            cheap_failed = [r for r in results if not r.passed]
            if check.needs_agent_success and (cheap_failed or not attempt.agent_ok):
                why = ", ".join(f"{r.type} ({r.label})" for r in cheap_failed) or "the agent did not succeed"
                skipped.append(f"{exp.type} #{idx + 1} skipped: {why} failed first")
                continue
            label = check.label(exp)
            store.submit(store.tx().event(CheckStarted(index=idx, total=total, type=exp.type, label=label), **ids))
            start = self.clock.monotonic()
            outcome = await check.run(exp, dataclasses.replace(ctx, index=idx))
            c = outcome.at(idx, None if outcome.duration else self.clock.monotonic() - start)
            results.append(c)
            assessment.checks.append(c)
            tx = store.tx().check(assessment.id, task.id, c, self.clock.now())
            tx.event(CheckComplete(index=idx, total=total, type=c.type, label=c.label, passed=c.passed,
                                   message=c.message, global_score=c.global_score, scores=c.scores), **ids)
            store.submit(tx)
        passed = all(r.passed for r in results)
        failed = [r for r in results if not r.passed]
        if not exps:
            message = "no expectations: the agent's exit code decides"
        elif passed:
            message = f"{len(results)}/{total} checks passed"
        else:
            message = f"{len(failed)}/{total} checks failed: " + "; ".join(f"{r.type}: {r.message}" for r in failed)
        if skipped:
            message += " (" + "; ".join(skipped) + ")"
        global_score, scores = combine_scores(results)
        assessment.status = AssessmentStatus.COMPLETE
        assessment.passed = passed
        assessment.message = message
        assessment.finished_at = self.clock.now()
        assessment.global_score = global_score
        assessment.scores = scores
        tx = store.tx().assessment(assessment)
        tx.event(AssessmentComplete(attempt=attempt.number, trigger=assessment.trigger,
                                    passed=passed and attempt.agent_ok, checks_passed=passed, message=message,
                                    global_score=global_score, scores=scores), **ids)
        store.submit(tx)
        return Verdict(passed, results, message)

    # -- the expectation judge ------------------------------------------------------------------------------
    def judge_enabled(self, m: Mission) -> bool:
        setting = m.spec.settings.auto_correct_expectations
        return self.cfg.judge.correct_expectations and setting is not False and bool(judge_settings(self.cfg))

    async def judge_and_reassess(self, m: Mission, task: Task, attempt: Attempt, verdict: Verdict) -> Verdict:
        """Once per task, on its first failure after a clean exit: are the expectations wrong, or the work?

        The judge may correct a command, a path or (within limits) a review threshold; the mission file's
        expectations are kept, the corrected set is stored on the task, and the attempt is assessed again.
        """
        store = self.store
        ids: dict[str, Any] = {"mission_id": task.mission_id, "task_id": task.id}
        task.judge_used = True
        await store.commit(store.tx().task(task))  # at most once, even across a crash
        current = task.expectations or [
            e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in task.spec.expectations]
        failed = [{"index": c.index, "type": c.type, "label": c.label, "message": c.message, "details": c.details,
                   "globalScore": c.global_score} for c in verdict.checks if not c.passed]
        output = "\n".join(x for x in (attempt.stdout_tail[-3000:], attempt.stderr_tail[-1500:]) if x.strip())
        judge = judge_settings(self.cfg)[0]
        result = await judge_expectations(self.llm, judge, title=task.title, description=task.spec.description,
                                          agent_output=output, failed=failed, expectations=current,
                                          floor=self.cfg.judge.threshold_floor, files_changed=changed_files(attempt))
        tx = store.tx().review(f"{attempt.id}/judge", -1, 0, task.id, judge.model, result.error is None,
                               orjson.dumps(result.to_json()).decode(), self.clock.now())
        if not result.changed:
            tx.event(AssessmentJudged(changed=False, verdicts=result.verdicts, error=result.error), **ids)
            store.submit(tx)
            return verdict
        task.expectations = result.expectations
        tx.task(task)
        tx.event(AssessmentCorrected(task_id=task.id, corrections=[c.to_json() for c in result.applied],
                                     rejected=[r.to_json() for r in result.rejected]), **ids)
        again = Assessment(id=f"{attempt.id}/2", attempt_id=attempt.id, task_id=task.id, trigger=AttemptKind.JUDGE,
                           status=AssessmentStatus.RUNNING, created_at=self.clock.now())
        tx.assessment(again)
        tx.event(AssessmentStarted(attempt=attempt.number, trigger=AttemptKind.JUDGE, total=len(current)), **ids)
        store.submit(tx)
        return await self.assess(m, task, attempt, again)


def combine_scores(results: Sequence[CheckOutcome]) -> tuple[float | None, list[dict[str, Any]] | None]:
    """The assessment's score: the mean of its llm_review global scores (one review: that review's score)."""
    reviewed = [r for r in results if r.global_score is not None]
    if not reviewed:
        return None, None
    global_score = round(sum(r.global_score or 0.0 for r in reviewed) / len(reviewed), 4)
    scores = [s for r in reviewed for s in r.scores or []]
    return global_score, scores
