"""One task's turn: start an attempt, run the agent, assess the result, decide what comes next.

The attempt row is durable before the agent's process starts (so a crash never loses track of a run), the
agent's result is stored before any check runs (so a restart resumes the checks instead of re-running the
agent), and each check result is stored as it completes.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import orjson

from polpo.agents.base import AgentRequest
from polpo.assessment.pipeline import Verdict, assess
from polpo.clock import iso
from polpo.engine import policy
from polpo.engine.engine import Engine, RunHandle
from polpo.engine.model import Assessment, Attempt, Task
from polpo.engine.prompts import build_prompt, feedback_text
from polpo.events import catalog as E
from polpo.llm.secrets import redact
from polpo.tools.procs import process_start_ticks
from polpo.workspace import diff, snapshot

log = logging.getLogger("polpo.runner")

ATTEMPT_MARK = "POLPO_ATTEMPT_MARK"


async def run_task(engine: Engine, task: Task, handle: RunHandle) -> None:
    try:
        with anyio.CancelScope() as scope:
            handle.scope = scope
            if handle.stop_reason:
                scope.cancel()
            if task.status == "review":
                await resume_assessment(engine, task, handle)
            else:
                await _attempt(engine, task, handle)
        if handle.stop_reason:
            with anyio.CancelScope(shield=True):
                await _stopped(engine, task, handle)
    finally:
        engine.release(handle)


def attempt_mark(engine: Engine, attempt_id: str) -> str:
    return f"{engine.cfg.state_dir}|{attempt_id}"


async def _attempt(engine: Engine, task: Task, handle: RunHandle) -> None:
    m = engine.missions[task.mission_id]
    slot = engine.slot(task)
    store = engine.store
    n = task.attempts + 1
    kind = task.next_kind
    expectations = [e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in task.spec.expectations]
    max_retries, max_fix = engine.budget(task)
    label = (f" {task.fix_attempts}/{max_fix}" if kind == "fix" else f" {task.retries}/{max_retries}"
             if kind == "retry" else "")
    prompt = build_prompt(title=task.title, description=task.spec.description, mission_name=m.name,
                          mission_description=m.spec.description, expectations=expectations, kind=kind,
                          feedback=task.feedback, attempt_label=label)
    attempt = Attempt(id=f"{task.id}/{n}", task_id=task.id, mission_id=m.id, number=n, kind=kind,
                      agent=task.agent, status="starting", started_at=engine.clock.now(), prompt=prompt,
                      model=task.model or slot.model)
    task.attempts = n
    handle.attempt = attempt
    engine.attempts[task.id] = attempt
    tx = store.tx().attempt(attempt)
    engine.transition(tx, task, "dispatch", attempt=n, kind=kind, agent=task.agent)
    await store.commit(tx)  # durable before the process exists

    before = await anyio.to_thread.run_sync(snapshot, m.workspace)

    def on_start(pid: int | None) -> None:
        attempt.pid = pid
        attempt.pid_ticks = process_start_ticks(pid) if pid is not None else None
        attempt.status = "running"
        stx = store.tx().attempt(attempt)
        engine.transition(stx, task, "spawned", attempt=n)
        stx.event(E.AGENT_SPAWNED, mission_id=m.id, task_id=task.id, agentName=task.agent, attempt=n,
                  pid=pid, kind=kind, model=attempt.model)
        store.submit(stx)

    siblings = _siblings(m, task) if slot.kind == "llm" else ()  # O(tasks): only for agents that read it
    request = AgentRequest(
        task_id=task.id, mission_id=m.id, mission_name=m.name, attempt_id=attempt.id, attempt_number=n,
        kind=kind,  # type: ignore[arg-type]
        title=task.title, description=task.spec.description, prompt=prompt, feedback=task.feedback,
        workspace=m.workspace, timeout=engine.timeout_for(task), expectations=expectations,
        env_marker=(ATTEMPT_MARK, attempt_mark(engine, attempt.id)), mission_goal=m.spec.description or "",
        siblings=siblings, model=task.model)
    if slot.kind == "llm":
        on_start(None)  # no process of its own: the conversation starts now
    result = await slot.agent.run(request, on_start=on_start)

    after = await anyio.to_thread.run_sync(snapshot, m.workspace)
    changes = diff(before, after)
    now = engine.clock.now()
    attempt.status = "finished"
    attempt.exit_code = result.exit_code
    attempt.signal = result.signal
    attempt.timed_out = result.timed_out
    attempt.error = redact(result.error) if result.error else None
    attempt.stdout_tail = redact(result.stdout_tail)  # a command agent inherits the daemon's environment
    attempt.stderr_tail = redact(result.stderr_tail)
    attempt.stdout_bytes = result.stdout_bytes
    attempt.stderr_bytes = result.stderr_bytes
    attempt.duration = round(result.duration, 4)
    attempt.files = changes.as_dict()
    attempt.finished_at = now
    attempt.model = result.model or attempt.model
    attempt.outcomes = result.outcomes or None
    attempt.tokens = result.tokens or None
    attempt.cost = result.cost
    attempt.transcript = result.transcript
    tx = store.tx().attempt(attempt)
    if result.transcript is not None:
        tx.transcript(attempt.id, task.id, redact(orjson.dumps(result.transcript).decode()))
    if task.status == "assigned":  # the process never started (spawn error)
        engine.transition(tx, task, "spawned", attempt=n, error=result.error)
    tx.event(E.AGENT_FINISHED, mission_id=m.id, task_id=task.id, agentName=task.agent, attempt=n,
             exitCode=result.exit_code, duration=attempt.duration, timedOut=result.timed_out,
             error=result.error, filesChanged=sum(len(v) for v in attempt.files.values()))
    if result.timed_out:
        tx.event(E.TASK_TIMEOUT, mission_id=m.id, task_id=task.id, elapsed=attempt.duration,
                 timeout=engine.timeout_for(task))
    engine.transition(tx, task, "finished", attempt=n, exitCode=result.exit_code)
    store.submit(tx)
    await _assess_and_decide(engine, task, attempt, None)


async def resume_assessment(engine: Engine, task: Task, handle: RunHandle) -> None:
    """After a restart: the agent's result is stored; finish its assessment without re-running it."""
    attempt = engine.attempts[task.id]
    handle.attempt = attempt
    from polpo.engine.recovery import load_open_assessment

    existing = await load_open_assessment(engine, attempt)
    await _assess_and_decide(engine, task, attempt, existing)


async def _assess_and_decide(engine: Engine, task: Task, attempt: Attempt,
                             existing: Assessment | None) -> None:
    m = engine.missions[task.mission_id]
    store = engine.store
    if existing is None:
        existing = Assessment(id=f"{attempt.id}/1", attempt_id=attempt.id, task_id=task.id,
                              trigger=attempt.kind, status="running", created_at=engine.clock.now())
        tx = store.tx().assessment(existing)
        tx.event(E.ASSESSMENT_STARTED, mission_id=m.id, task_id=task.id, attempt=attempt.number,
                 trigger=existing.trigger, total=len(task.spec.expectations))
        store.submit(tx)
    verdict = await assess(engine, task, attempt, existing)
    if not verdict.passed and attempt.agent_ok and not task.judge_used and _judge_enabled(engine, task):
        verdict = await _judge_and_reassess(engine, task, attempt, verdict)

    max_retries, max_fix = engine.budget(task)
    counters = policy.Counters(task.retries, task.fix_attempts, task.escalation_level)
    budget = policy.Budget(max_retries, max_fix)
    escalation = engine.escalation_for(task)
    decision = policy.decide(passed=verdict.passed, agent_ok=attempt.agent_ok, counters=counters,
                             budget=budget, side_effects=task.spec.side_effects, escalation=escalation)
    if decision.action == "block":
        underlying = policy.decide(passed=verdict.passed, agent_ok=attempt.agent_ok, counters=counters,
                                   budget=budget, escalation=escalation)
        decision = underlying if underlying.action == "fail" else policy.Decision(
            "block", underlying.counters, f"{decision.reason}; then {underlying.action}")
        next_kind = underlying.action
    else:
        next_kind = decision.action
    feedback = feedback_text(checks=verdict.checks, exit_code=attempt.exit_code, timed_out=attempt.timed_out,
                             error=attempt.error, stderr_tail=attempt.stderr_tail)
    attempt.verdict = "passed" if verdict.passed and attempt.agent_ok else "failed"
    tx = store.tx().attempt(attempt)
    ids: dict[str, Any] = {"mission_id": m.id, "task_id": task.id}
    if decision.action == "done":
        task.feedback = None
        task.score = _latest_score(verdict)
        engine.transition(tx, task, "pass", attempt=attempt.number)
    elif decision.action in ("fix", "retry", "escalate", "block"):
        task.retries, task.fix_attempts = decision.counters.retries, decision.counters.fix_attempts
        task.escalation_level = decision.counters.level
        task.next_kind = "retry" if next_kind == "escalate" else next_kind
        if decision.target is not None:
            _escalate(engine, tx, task, decision.target)
        task.feedback = feedback
        if next_kind == "fix":
            task.total_fixes += 1
        if decision.action == "block":
            tx.event(E.TASK_RETRY_BLOCKED, **ids, reason=decision.reason)
            engine.transition(tx, task, "block", decision.reason)
        elif next_kind == "fix":
            tx.event(E.TASK_FIX, **ids, attempt=task.fix_attempts, maxFix=max_fix)
            engine.transition(tx, task, "fix", _first_line(feedback))
        elif next_kind == "escalate":
            tx.event(E.TASK_MAX_RETRIES, **ids, retries=task.retries, maxRetries=max_retries, escalating=True)
            engine.transition(tx, task, "escalate", decision.reason)
        else:
            tx.event(E.TASK_RETRY, **ids, attempt=task.retries, maxRetries=max_retries)
            engine.transition(tx, task, "retry", _first_line(feedback))
    else:
        task.feedback = feedback
        tx.event(E.TASK_MAX_RETRIES, **ids, retries=task.retries, maxRetries=max_retries)
        engine.transition(tx, task, "exhausted", f"{decision.reason}: {_first_line(feedback)}")
    store.submit(tx)
    engine.after_change(task)


MAX_SIBLINGS = 50


def _siblings(m: Any, task: Task) -> tuple[tuple[str, str], ...]:
    """(title, status) of the mission's other tasks for an LLM agent's prompt, at most MAX_SIBLINGS of them."""
    out = []
    for t in m.tasks.values():
        if t.id != task.id:
            out.append((t.title, t.status))
            if len(out) >= MAX_SIBLINGS:
                break
    return tuple(out)


def _latest_score(verdict: Verdict) -> float | None:
    from polpo.assessment.pipeline import combine_scores

    return combine_scores(verdict.checks)[0]


def _judge_enabled(engine: Engine, task: Task) -> bool:
    from polpo.assessment.llm_review import judge_settings

    setting = engine.missions[task.mission_id].spec.settings.auto_correct_expectations
    return engine.cfg.judge.correct_expectations and setting is not False and bool(judge_settings(engine.cfg))


async def _judge_and_reassess(engine: Engine, task: Task, attempt: Attempt, verdict: Verdict) -> Verdict:
    """Once per task, on its first failure after a clean exit: are the expectations wrong, or the work?

    The judge may correct a command, a path or (within limits) a review threshold; the mission file's
    expectations are kept, the corrected set is stored on the task, and the attempt is assessed again.
    """
    from polpo.assessment.llm_review import judge_settings
    from polpo.assessment.review.judge import judge_expectations

    store = engine.store
    ids: dict[str, Any] = {"mission_id": task.mission_id, "task_id": task.id}
    task.judge_used = True
    await store.commit(store.tx().task(task))  # at most once, even across a crash
    current = task.expectations or [
        e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in task.spec.expectations]
    failed = [{k: c.get(k) for k in ("index", "type", "label", "message", "details", "globalScore")}
              for c in verdict.checks if not c["passed"]]
    output = "\n".join(x for x in (attempt.stdout_tail[-3000:], attempt.stderr_tail[-1500:]) if x.strip())
    judge = judge_settings(engine.cfg)[0]
    result = await judge_expectations(engine.agents.llm, judge, title=task.title,
                                      description=task.spec.description, agent_output=output, failed=failed,
                                      expectations=current, floor=engine.cfg.judge.threshold_floor,
                                      files_changed=_changed_files(attempt))
    tx = store.tx().review((f"{attempt.id}/judge", -1, 0, task.id, judge.model, int(result.error is None),
                            orjson.dumps(result.to_json()).decode(), iso(engine.clock.now())))
    if not result.changed:
        tx.event(E.ASSESSMENT_JUDGED, **ids, changed=False, verdicts=result.verdicts, error=result.error)
        store.submit(tx)
        return verdict
    task.expectations = result.expectations
    tx.task(task)
    tx.event(E.ASSESSMENT_CORRECTED, **ids, taskId=task.id, corrections=[c.to_json() for c in result.applied],
             rejected=[r.to_json() for r in result.rejected])
    again = Assessment(id=f"{attempt.id}/2", attempt_id=attempt.id, task_id=task.id, trigger="judge",
                       status="running", created_at=engine.clock.now())
    tx.assessment(again)
    tx.event(E.ASSESSMENT_STARTED, **ids, attempt=attempt.number, trigger="judge", total=len(current))
    store.submit(tx)
    return await assess(engine, task, attempt, again)


def _changed_files(attempt: Attempt) -> list[str]:
    files = attempt.files or {}
    return sorted({*files.get("created", []), *files.get("modified", [])})


def _escalate(engine: Engine, tx: Any, task: Task, target: policy.Target) -> None:
    """Switch the task to a stronger model or its fallback agent; the next attempt records which ran it."""
    if target.kind == "model":
        task.model = target.value
    else:
        task.agent = target.value
        task.model = None
    tx.event(E.ESCALATION_TRIGGERED, mission_id=task.mission_id, task_id=task.id, level=task.escalation_level,
             handler=target.kind, target=target.value, agent=task.agent, model=task.model)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip() and not line.strip().endswith(":"):
            return line.strip()[:300]
    return text.strip()[:300]


async def _stopped(engine: Engine, task: Task, handle: RunHandle) -> None:
    """The run was cancelled from outside: a mission cancel, or the daemon shutting down."""
    store = engine.store
    tx = store.tx()
    attempt = handle.attempt
    if attempt is not None and attempt.status in ("starting", "running"):
        attempt.status = "interrupted"
        attempt.finished_at = engine.clock.now()
        attempt.error = f"interrupted ({handle.stop_reason})"
        tx.attempt(attempt)
    if handle.stop_reason == "sla" and not task.terminal:
        from polpo.engine.sla import SLA_REASON

        engine.transition(tx, task, "sla_fail", SLA_REASON)
        store.submit(tx)
        engine.after_change(task)
        return
    if handle.stop_reason == "cancel":
        if not task.terminal:
            engine.transition(tx, task, "cancel", "mission cancelled")
            store.submit(tx)
            engine.after_change(task)
            return
    elif task.status in ("assigned", "in_progress"):
        engine.transition(tx, task, "interrupted", "daemon shutting down; the attempt runs again on restart")
    store.submit(tx)


def check_row(assessment_id: str, idx: int, task_id: str, c: dict[str, Any], ts: str) -> tuple[Any, ...]:
    scores = ({"globalScore": c["globalScore"], "scores": c.get("scores") or []}
              if c.get("globalScore") is not None else None)
    return (assessment_id, idx, task_id, c["type"], c["label"], int(c["passed"]), c["message"],
            c.get("details"), c["duration"], ts, orjson.dumps(scores).decode() if scores else None)


__all__ = ["ATTEMPT_MARK", "check_row", "iso", "run_task"]
