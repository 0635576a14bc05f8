"""Assessment of one attempt: expectations in order, cheapest first, each result stored as it completes.

Order: ``file_exists`` → ``test``/``script`` → ``llm_review``. When a cheap check fails the LLM review is
skipped for that attempt (no API calls spent on work that is known to be wrong) and the feedback names the
failed check. A resumed assessment (after a restart) skips checks whose result is already stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import TypeAdapter

from polpo.assessment.checks import check_label, run_command_check, run_file_exists
from polpo.assessment.llm_review import Reviews, judge_settings
from polpo.assessment.review.judge import judge_expectations
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
from polpo.mission.schema import (
    Expectation,
    FileExistsExpectation,
    LlmReviewExpectation,
    ScriptExpectation,
    TestExpectation,
)
from polpo.model.records import Assessment, Attempt, Mission, Task
from polpo.model.status import AssessmentStatus, AttemptKind
from polpo.store.protocol import Store

__all__ = ["Assessor", "Verdict", "combine_scores", "expectations_of", "ordered"]

_EXPECTATION: TypeAdapter[Any] = TypeAdapter(Expectation)
_RANK = {"file_exists": 0, "test": 1, "script": 1, "llm_review": 2}


@dataclass(frozen=True)
class Verdict:
    passed: bool
    checks: list[dict[str, Any]]
    message: str


def ordered(expectations: list[Any]) -> list[tuple[int, Any]]:
    """(original index, expectation) sorted cheapest first, file order within a rank."""
    return sorted(enumerate(expectations), key=lambda p: (_RANK.get(p[1].type, 3), p[0]))


def expectations_of(task: Task) -> list[Any]:
    """The task's expectations: the judge-corrected ones when there are, else the mission file's."""
    if task.expectations is not None:
        return [_EXPECTATION.validate_python(e) for e in task.expectations]
    return list(task.spec.expectations)


class Assessor:
    """Runs a task's checks against an attempt and stores every result; the review panel is one of them."""

    def __init__(self, cfg: Config, store: Store, clock: Clock, llm: LLMClient) -> None:
        self.cfg = cfg
        self.store = store
        self.clock = clock
        self.llm = llm
        self.reviews = Reviews(cfg, store, clock, llm)

    async def assess(self, m: Mission, task: Task, attempt: Attempt, assessment: Assessment) -> Verdict:
        store = self.store
        exps = expectations_of(task)
        total = len(exps)
        done = {c["index"]: c for c in assessment.checks}
        results: list[dict[str, Any]] = []
        skipped: list[str] = []
        ids: dict[str, Any] = {"mission_id": m.id, "task_id": task.id}
        default_timeout = self.cfg.defaults.check_timeout.total_seconds()
        for idx, exp in ordered(exps):
            if idx in done:
                results.append(done[idx])
                continue
            cheap_failed = [r for r in results if not r["passed"]]
            if isinstance(exp, LlmReviewExpectation) and (cheap_failed or not attempt.agent_ok):
                why = ", ".join(f"{r['type']} ({r['label']})" for r in cheap_failed) or "the agent did not succeed"
                skipped.append(f"llm_review #{idx + 1} skipped: {why} failed first")
                continue
            label = _label(exp)
            store.submit(store.tx().event(CheckStarted(index=idx, total=total, type=exp.type, label=label), **ids))
            start = self.clock.now()
            if isinstance(exp, FileExistsExpectation):
                c = _check_dict(await run_file_exists(exp.all_paths, workspace=m.workspace, clock=self.clock))
            elif isinstance(exp, TestExpectation | ScriptExpectation):
                timeout = exp.timeout.total_seconds() if exp.timeout is not None else default_timeout
                c = _check_dict(await run_command_check(
                    exp.type, exp.command, workspace=m.workspace, clock=self.clock, timeout=timeout,
                    expect_exit_code=exp.expect_exit_code if isinstance(exp, ScriptExpectation) else 0))
            else:
                c = await self.reviews.review(m, task, attempt, assessment, idx, exp)
                c.update(type=exp.type, label=label,
                         duration=round((self.clock.now() - start).total_seconds(), 4))
            c["index"] = idx
            results.append(c)
            assessment.checks.append(c)
            tx = store.tx().check(assessment.id, task.id, c, self.clock.now())
            tx.event(CheckComplete(index=idx, total=total, type=c["type"], label=c["label"], passed=c["passed"],
                                   message=c["message"], global_score=c.get("globalScore"),
                                   scores=c.get("scores")), **ids)
            store.submit(tx)
        passed = all(r["passed"] for r in results)
        failed = [r for r in results if not r["passed"]]
        if not exps:
            message = "no expectations: the agent's exit code decides"
        elif passed:
            message = f"{len(results)}/{total} checks passed"
        else:
            message = f"{len(failed)}/{total} checks failed: " + "; ".join(
                f"{r['type']}: {r['message']}" for r in failed)
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
        failed = [{k: c.get(k) for k in ("index", "type", "label", "message", "details", "globalScore")}
                  for c in verdict.checks if not c["passed"]]
        output = "\n".join(x for x in (attempt.stdout_tail[-3000:], attempt.stderr_tail[-1500:]) if x.strip())
        judge = judge_settings(self.cfg)[0]
        result = await judge_expectations(self.llm, judge, title=task.title, description=task.spec.description,
                                          agent_output=output, failed=failed, expectations=current,
                                          floor=self.cfg.judge.threshold_floor, files_changed=_changed_files(attempt))
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


def combine_scores(results: list[dict[str, Any]]) -> tuple[float | None, list[dict[str, Any]] | None]:
    """The assessment's score: the mean of its llm_review global scores (one review: that review's score)."""
    reviewed = [r for r in results if r.get("globalScore") is not None]
    if not reviewed:
        return None, None
    global_score = round(sum(r["globalScore"] for r in reviewed) / len(reviewed), 4)
    scores = [s for r in reviewed for s in r.get("scores") or []]
    return global_score, scores


def _changed_files(attempt: Attempt) -> list[str]:
    files = attempt.files or {}
    return sorted({*files.get("created", []), *files.get("modified", [])})


def _check_dict(r: Any) -> dict[str, Any]:
    return {"type": r.type, "label": r.label, "passed": r.passed, "message": r.message,
            "details": r.details, "duration": round(r.duration, 4)}


def _label(exp: Any) -> str:
    if isinstance(exp, FileExistsExpectation):
        return check_label("file_exists", paths=exp.all_paths)
    if isinstance(exp, TestExpectation | ScriptExpectation):
        return check_label(exp.type, command=exp.command)
    if isinstance(exp, LlmReviewExpectation):
        return (exp.criteria or exp.prompt or "LLM review")[:60]
    return str(exp.type)
