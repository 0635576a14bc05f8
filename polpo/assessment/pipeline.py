"""Assessment of one attempt: expectations in order, cheapest first, each result stored as it completes.

Order: ``file_exists`` → ``test``/``script`` → ``llm_review``. When a cheap check fails the LLM review is
skipped for that attempt (no API calls spent on work that is known to be wrong) and the feedback names the
failed check. A resumed assessment (after a restart) skips checks whose result is already stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from polpo.assessment.checks import check_label, run_command_check, run_file_exists
from polpo.clock import iso
from polpo.events import catalog as E
from polpo.mission.schema import (
    Expectation,
    FileExistsExpectation,
    LlmReviewExpectation,
    ScriptExpectation,
    TestExpectation,
)

if TYPE_CHECKING:
    from polpo.engine.engine import Engine
    from polpo.engine.model import Assessment, Attempt, Task

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


async def assess(engine: Engine, task: Task, attempt: Attempt, assessment: Assessment) -> Verdict:
    from polpo.assessment.llm_review import review
    from polpo.engine.runner import check_row

    m = engine.missions[task.mission_id]
    store = engine.store
    exps = expectations_of(task)
    total = len(exps)
    done = {c["index"]: c for c in assessment.checks}
    results: list[dict[str, Any]] = []
    skipped: list[str] = []
    ids = {"mission_id": m.id, "task_id": task.id}
    default_timeout = engine.cfg.defaults.check_timeout.total_seconds()
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
        store.submit(store.tx().event(E.ASSESSMENT_CHECK_STARTED, **ids, index=idx, total=total,
                                      type=exp.type, label=label))
        start = engine.clock.now()
        if isinstance(exp, FileExistsExpectation):
            r = await run_file_exists(exp.all_paths, workspace=m.workspace, clock=engine.clock)
            c = _check_dict(r)
        elif isinstance(exp, TestExpectation | ScriptExpectation):
            timeout = exp.timeout.total_seconds() if exp.timeout is not None else default_timeout
            r = await run_command_check(
                exp.type, exp.command, workspace=m.workspace, clock=engine.clock, timeout=timeout,
                expect_exit_code=exp.expect_exit_code if isinstance(exp, ScriptExpectation) else 0)
            c = _check_dict(r)
        else:
            c, _ = await review(engine, task, attempt, assessment, idx, exp)
            c.update(type=exp.type, label=label,
                     duration=round((engine.clock.now() - start).total_seconds(), 4))
        c["index"] = idx
        results.append(c)
        assessment.checks.append(c)
        tx = store.tx().check(check_row(assessment.id, idx, task.id, c, iso(engine.clock.now())))
        extra = {k: c[k] for k in ("globalScore", "scores") if c.get(k) is not None}
        tx.event(E.ASSESSMENT_CHECK_COMPLETE, **ids, index=idx, total=total, type=c["type"], label=c["label"],
                 passed=c["passed"], message=c["message"], **extra)
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
    assessment.status = "complete"
    assessment.passed = passed
    assessment.message = message
    assessment.finished_at = engine.clock.now()
    assessment.global_score = global_score
    assessment.scores = scores
    tx = store.tx().assessment(assessment)
    tx.event(E.ASSESSMENT_COMPLETE, **ids, attempt=attempt.number, trigger=assessment.trigger,
             passed=passed and attempt.agent_ok, checksPassed=passed, message=message, globalScore=global_score,
             scores=scores)
    store.submit(tx)
    return Verdict(passed, results, message)


def combine_scores(results: list[dict[str, Any]]) -> tuple[float | None, list[dict[str, Any]] | None]:
    """The assessment's score: the mean of its llm_review global scores (one review: that review's score)."""
    reviewed = [r for r in results if r.get("globalScore") is not None]
    if not reviewed:
        return None, None
    global_score = round(sum(r["globalScore"] for r in reviewed) / len(reviewed), 4)
    scores = [s for r in reviewed for s in r.get("scores") or []]
    return global_score, scores


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
