"""Assessment of one attempt: tiers in order, each tier's checks cheapest first, each result stored as it completes.

Each expectation is run by its registered check type (:mod:`polpo.checks.registry`), which gives its rank:
files, then commands, then LLM reviews. The task's ``tiers`` (or the implied cascade of plain expectations, see
:mod:`polpo.assessment.tiers`) decide when to stop: a rejecting tier's failure ends the assessment, an accepting
tier's success accepts without running the rest. A check that needs a successful agent (the review panel) is
skipped when the agent failed or a cheaper check of its tier failed: no API calls are spent on work that is known
to be wrong, and the feedback names the check that failed. Required ``expectedOutcomes`` are checked first, as
a rejecting tier of their own.

A check that could not be done (``error``: the judge unreachable) leaves the assessment undecided and open: the
verdict carries the error, and assessing the same assessment again re-runs only what has no result. A resumed
assessment (after a restart) likewise skips checks whose result is stored.

A check the judge could not decide (``undecided``) leaves it for a person: the assessment is stored ``undecided``
(passed unknown, its score and message kept) and the verdict carries the reason; the task waits
(:mod:`polpo.engine.person_review`), and the person's verdict is written into that check, so assessing the same
assessment again completes it with their verdict, running nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson
from pydantic import TypeAdapter

from polpo.assessment.evidence import changed_files, evidence
from polpo.assessment.judge import judge_expectations, skip_reason
from polpo.assessment.judge_cache import CACHE_FILE, JudgeCache
from polpo.assessment.review_backend import AssessmentReviews, judge_settings, panel_options
from polpo.assessment.tiers import ACCEPT, REJECT, Decision, Result, TierPlan, plan, tier_decision
from polpo.checks.base import CheckContext, CheckOutcome
from polpo.checks.expectations import MetricExpectation
from polpo.checks.outcomes import OUTCOMES_TYPE, check_outcomes
from polpo.checks.registry import Expectation, check_for
from polpo.clock import Clock, iso
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
from polpo.model.spend import ReviewSpend
from polpo.model.status import AssessmentStatus, AttemptKind
from polpo.store.protocol import Store
from polpo.tools.marks import attempt_env

__all__ = ["Assessor", "Verdict", "combine_scores", "expectations_of", "ordered"]

_EXPECTATION: TypeAdapter[Any] = TypeAdapter(Expectation)


@dataclass(frozen=True)
class Verdict:
    passed: bool
    checks: list[CheckOutcome]
    """The checks that count: the tiers that let the cascade through and the one that decided (an
    ``ACCEPT_ON_ALL_PASS`` tier that escalated does not count)."""
    message: str
    error: str | None = None
    """Set when the assessment is undecided because a check could not be done (the judge is unreachable)."""
    retryable: bool = True
    tier: str | None = None
    """The tier that decided (``checks`` / ``review`` for the implied cascade of plain expectations)."""
    tier_policy: str | None = None
    assessment: Assessment | None = None
    """The assessment that produced it (still open when ``error`` is set: assessing it again resumes it)."""
    undecided: str | None = None
    """Set when the judge cannot tell and a person must decide (why): the assessment is stored undecided."""
    failed_by_person: bool = False
    """A person failed one of its checks (the judge could not tell): the expectation judge does not second-guess
    them."""

    @property
    def contestable(self) -> bool:
        """A failure the expectation judge may question: decided, and not by a person."""
        return not self.passed and self.undecided is None and not self.failed_by_person


def ordered(expectations: Sequence[Any]) -> list[tuple[int, Any]]:
    """(original index, expectation) sorted cheapest first, file order within a rank."""
    return sorted(enumerate(expectations), key=lambda p: (check_for(p[1].type).rank, p[0]))


def expectations_of(task: Task) -> list[Any]:
    """The task's expectations, tiers flattened: the judge-corrected ones when there are, else the file's."""
    if task.expectations is not None:
        return [_EXPECTATION.validate_python(e) for e in task.expectations]
    return task.spec.all_expectations


class Assessor:
    """Runs a task's checks against an attempt and stores every result; the review panel is one of them."""

    def __init__(self, cfg: Config, store: Store, clock: Clock, llm: LLMClient,
                 workspace_of: Callable[[Mission, Task], Path] | None = None, cache: JudgeCache | None = None) -> None:
        self.cfg = cfg
        self.store = store
        self.clock = clock
        self.llm = llm
        self.workspace_of = workspace_of  # where a task's checks run: its own worktree when it is isolated
        if cache is None and cfg.judge.cache:
            cache = JudgeCache(cfg.state_dir / CACHE_FILE, cfg.judge.cache_ttl.total_seconds(), clock)
        self.cache = cache
        self.options = panel_options(cfg)

    def _context(self, m: Mission, task: Task, attempt: Attempt, assessment: Assessment,
                 baselines: dict[int, float]) -> CheckContext:
        files, timeline = evidence(attempt)
        cache = self.cache.client_for(self.llm) if self.cache is not None else None
        reviews = AssessmentReviews(self.cfg, self.store, self.clock, self.llm, task_id=task.id,
                                    assessment_id=assessment.id, options=self.options, cache=cache, spent=m.spent)
        outcomes = [o.model_dump(mode="json", by_alias=True, exclude_none=True) for o in task.spec.expected_outcomes]
        return CheckContext(workspace=self.workspace_of(m, task) if self.workspace_of else m.workspace,
                            clock=self.clock,
                            check_timeout=self.cfg.defaults.check_timeout.total_seconds(), task_title=task.title,
                            task_description=task.spec.description, attempt_number=attempt.number,
                            agent_ok=attempt.agent_ok, files_changed=files, timeline=timeline,
                            env=attempt_env(self.cfg.state_dir, attempt.id), review=reviews,
                            expected_outcomes=outcomes, outcomes=list(attempt.outcomes or []),
                            output=attempt.stdout_tail, baselines=baselines)

    async def assess(self, m: Mission, task: Task, attempt: Attempt, assessment: Assessment) -> Verdict:
        """Run the tiers in order (see :mod:`polpo.assessment.tiers`); a stored result is not run again,
        except an error, which is what a resumed assessment is for."""
        store = self.store
        exps = expectations_of(task)
        total = len(exps)
        done = {c.index: c for c in assessment.checks if c.error is None}
        ids: dict[str, Any] = {"mission_id": m.id, "task_id": task.id}
        ctx: CheckContext | None = None  # built when a check runs: a task without any needs none
        outcomes_expected = bool(task.spec.expected_outcomes)
        counted: list[CheckOutcome] = []
        skipped: list[str] = []
        decision: Decision = "pass"
        decider: TierPlan | None = None
        plans = plan(task.spec.tiers, exps)
        if outcomes_expected:
            plans.insert(0, TierPlan("outcomes", REJECT, (total,), False))
        for tier in plans:
            results: list[CheckOutcome] = []
            states: list[Result] = []
            for idx in tier.indices:
                if idx in done:
                    c = done[idx]
                else:
                    exp = exps[idx] if idx < total else None
                    failed_here = [r for r in results if r.status == "failed"]
                    if exp is not None and check_for(exp.type).needs_agent_success \
                            and (failed_here or not attempt.agent_ok):
                        why = ", ".join(f"{r.type} ({r.label})" for r in failed_here) or "the agent did not succeed"
                        skipped.append(f"{exp.type} #{idx + 1} skipped: {why} failed first")
                        states.append("skipped")
                        continue
                    if ctx is None:  # a metric's baseline is read only for a task that has one
                        wanted = any(isinstance(e, MetricExpectation) and e.baseline for e in exps)
                        ctx = self._context(m, task, attempt, assessment,
                                            await store.task_baselines(task.id) if wanted else {})
                    ctx = replace(ctx, prior=(*counted, *results))  # a review is shown what the cheap checks found
                    c = await self._run_one(idx, exp, ctx, total, tier, ids, assessment, task)
                results.append(c)
                states.append("error" if c.error is not None else "undecided" if c.undecided is not None
                              else "passed" if c.passed else "failed")
            decision = tier_decision(tier.policy, states)
            if decision != "next" or tier.policy != ACCEPT:
                counted.extend(results)
            if decision != "next":
                decider = tier
                break
        later = plans[plans.index(decider) + 1:] if decider is not None else []
        if decider is not None and decider.explicit and later:
            skipped.append(f"tier(s) not run: {', '.join(t.name for t in later)}")
        elif later:  # the implied cascade says it as it always has
            why = ", ".join(f"{r.type} ({r.label})" for r in counted if r.status == "failed")
            skipped += [f"{exps[i].type} #{i + 1} skipped: {why} failed first" for t in later for i in t.indices]
        if decision == "error":
            return self._undecided(m, task, attempt, assessment, counted, decider, ids)
        if decision == "person":
            return self._for_person(assessment, counted, decider)
        passed = decision == "pass"
        failed = [r for r in counted if not r.passed]
        if not exps and not outcomes_expected:
            message = "no expectations: the agent's exit code decides"
        elif passed:
            message = f"{len(counted)}/{total} checks passed"
        else:
            message = f"{len(failed)}/{total} checks failed: " + "; ".join(f"{r.type}: {r.message}" for r in failed)
        if decider is not None and decider.explicit:
            message += f"; decided by tier {decider.name!r} ({decider.policy})"
        if skipped:
            message += " (" + "; ".join(skipped) + ")"
        global_score, scores = combine_scores(counted)
        assessment.status = AssessmentStatus.COMPLETE
        assessment.passed = passed
        assessment.message = message
        assessment.finished_at = self.clock.now()
        assessment.global_score = global_score
        assessment.scores = scores
        tx = store.tx().assessment(assessment)
        tx.event(AssessmentComplete(attempt=attempt.number, trigger=assessment.trigger,
                                    passed=passed and attempt.agent_ok, checks_passed=passed, message=message,
                                    global_score=global_score, scores=scores,
                                    tier=decider.name if decider else None,
                                    tier_policy=decider.policy if decider else None), **ids)
        store.submit(tx)
        return Verdict(passed, counted, message, tier=decider.name if decider else None,
                       tier_policy=decider.policy if decider else None, assessment=assessment,
                       failed_by_person=any(c.person is not None and not c.passed for c in counted))

    async def _run_one(self, idx: int, exp: Any, ctx: CheckContext, total: int, tier: TierPlan,
                       ids: dict[str, Any], assessment: Assessment, task: Task) -> CheckOutcome:
        """Run one check (``exp`` None: the expected-outcomes check), store it and announce it."""
        store = self.store
        label = check_for(exp.type).label(exp) if exp is not None else "expected outcomes"
        kind = exp.type if exp is not None else OUTCOMES_TYPE
        store.submit(store.tx().event(CheckStarted(index=idx, total=total, type=kind, label=label), **ids))
        start = self.clock.monotonic()
        if exp is None:
            outcome = check_outcomes(ctx.expected_outcomes, ctx.outcomes, ctx.workspace)
        else:
            outcome = await check_for(exp.type).run(exp, dataclasses.replace(ctx, index=idx))
        c = dataclasses.replace(outcome.at(idx, None if outcome.duration else self.clock.monotonic() - start),
                                tier=tier.name)
        assessment.checks = [x for x in assessment.checks if x.index != idx] + [c]
        tx = store.tx().check(assessment.id, task.id, c, self.clock.now())
        tx.event(CheckComplete(index=idx, total=total, type=c.type, label=c.label, passed=c.passed,
                               message=c.message, global_score=c.global_score, scores=c.scores, error=c.error,
                               tier=c.tier, undecided=c.undecided, metric=c.metric), **ids)
        store.submit(tx)
        return c

    def _undecided(self, m: Mission, task: Task, attempt: Attempt, assessment: Assessment,
                   counted: list[CheckOutcome], decider: TierPlan | None, ids: dict[str, Any]) -> Verdict:
        """A check could not be done: the assessment stays open (resumable), nothing is decided."""
        errors = [c for c in counted if c.error is not None]
        reason = "; ".join(f"{c.type} #{c.index + 1}: {c.error}" for c in errors)[:2000]
        assessment.message = f"undecided: {reason}"
        self.store.submit(self.store.tx().assessment(assessment))
        return Verdict(False, counted, assessment.message, error=reason,
                       retryable=all(c.retryable for c in errors), tier=decider.name if decider else None,
                       tier_policy=decider.policy if decider else None, assessment=assessment)

    def _for_person(self, assessment: Assessment, counted: list[CheckOutcome], decider: TierPlan | None) -> Verdict:
        """The judge cannot tell: the assessment is stored undecided (passed unknown), for a person to decide."""
        reason = "; ".join(f"{c.type} #{c.index + 1}: {c.undecided}" for c in counted if c.undecided)[:2000]
        assessment.status = AssessmentStatus.UNDECIDED
        assessment.passed = None
        assessment.message = f"a person decides: {reason}"
        assessment.finished_at = self.clock.now()
        assessment.global_score, assessment.scores = combine_scores(counted)
        self.store.submit(self.store.tx().assessment(assessment))
        return Verdict(False, counted, assessment.message, undecided=reason, tier=decider.name if decider else None,
                       tier_policy=decider.policy if decider else None, assessment=assessment)

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
            e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in task.spec.all_expectations]
        failed = [{"index": c.index, "type": c.type, "label": c.label, "message": c.message, "details": c.details,
                   "globalScore": c.global_score} for c in verdict.checks
                  if not c.passed and c.type != OUTCOMES_TYPE]
        output = "\n".join(x for x in (attempt.stdout_tail[-3000:], attempt.stderr_tail[-1500:]) if x.strip())
        skip = skip_reason(failed, current, combine_scores(verdict.checks)[0])
        if skip is not None:  # no call: it could not change the verdict (the chance is spent all the same)
            tx = store.tx().event(AssessmentJudged(changed=False, verdicts=[], error=None, skipped=skip), **ids)
            store.submit(tx)
            return verdict
        judge = judge_settings(self.cfg)[0]
        result = await judge_expectations(self.llm, judge, title=task.title, description=task.spec.description,
                                          agent_output=output, failed=failed, expectations=current,
                                          floor=self.cfg.judge.threshold_floor, files_changed=changed_files(attempt))
        now = self.clock.now()
        tx = store.tx().review(f"{attempt.id}/judge", -1, 0, task.id, judge.model, result.error is None,
                               orjson.dumps(result.to_json()).decode(), now,
                               tokens_in=result.tokens_in, tokens_out=result.tokens_out, cost=result.cost)
        m.spent.reviews[(f"{attempt.id}/judge", -1, 0)] = ReviewSpend(task.id, "judge", judge.model, result.tokens_in,
                                                                      result.tokens_out, result.cost, iso(now))
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
