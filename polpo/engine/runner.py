"""One task's turn: start an attempt, run the agent, assess the result, decide what comes next.

The attempt row is durable before the agent's process starts (a crash never loses track of a run), the agent's
result before any check runs (a restart resumes the checks, never the agent), and each check's result at its end.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import orjson

from polpo.agents.base import AgentRequest
from polpo.agents.prompts import build_prompt
from polpo.agents.registry import AgentFactory, AgentSlot
from polpo.agents.transcript import tool_log
from polpo.assessment.feedback import failure_reason, feedback_text
from polpo.assessment.pipeline import Assessor, Verdict, combine_scores
from polpo.changes.tracker import ChangeTracker, files_count
from polpo.checks.base import CheckOutcome
from polpo.clock import Clock, iso
from polpo.config import Config
from polpo.engine import policy
from polpo.engine.attempt_inputs import siblings, stored_prompt
from polpo.engine.baselines import Baselines
from polpo.engine.board import MissionBoard
from polpo.engine.budget import budget, escalation, timeout_seconds
from polpo.engine.commands import SLA_REASON
from polpo.engine.faults import FaultNotes, retrying
from polpo.engine.handles import RunHandle
from polpo.engine.isolation import Isolation
from polpo.engine.lifecycle import Trigger
from polpo.engine.outage import OutageKeeper
from polpo.engine.person_review import wait_for_person
from polpo.engine.questions import Questions
from polpo.engine.spend_book import DAILY, SpendBook, TurnMeter
from polpo.engine.start_stamp import stamp_later
from polpo.engine.stops import QualityStops, hold, refusal
from polpo.engine.workspace_faults import WorkspaceFaults
from polpo.events.catalog import (
    AgentFinished,
    AgentSpawned,
    AssessmentStarted,
    EscalationTriggered,
    TaskFix,
    TaskMaxRetries,
    TaskRetry,
    TaskRetryBlocked,
    TaskTimeout,
)
from polpo.llm.secrets import redact
from polpo.llm.spend import metering
from polpo.model.records import Assessment, Attempt, Mission, Task
from polpo.model.spend import AttemptSpend
from polpo.model.status import AssessmentStatus, AttemptKind, AttemptStatus, StopReason, TaskStatus
from polpo.store.protocol import Store
from polpo.store.tx import Tx
from polpo.tools.marks import ATTEMPT_MARK, attempt_mark

__all__ = ["TaskRunner"]


class TaskRunner:
    def __init__(self, *, cfg: Config, store: Store, clock: Clock, board: MissionBoard, agents: AgentFactory,
                 slot_of: Callable[[Task], AgentSlot], assessor: Assessor, tracker: ChangeTracker,
                 isolation: Isolation, spend: SpendBook, questions: Questions) -> None:
        self.cfg = cfg
        self.store = store
        self.clock = clock
        self.board = board
        self.agents = agents
        self.slot_of = slot_of
        self.assessor = assessor
        self.tracker = tracker
        self.isolation = isolation
        self.outage = OutageKeeper(cfg, store, board)  # judge and model-provider outages
        self.faults = FaultNotes(store, clock)  # passing faults of the environment (polpo.fsfaults)
        self.spend = spend  # budgets: every LLM call of a turn is metered (polpo.engine.spend_book)
        self.stops = QualityStops(store, board, spend)  # scores, the plateau, the end of a task over its budget
        self.baselines = Baselines(cfg, store, clock, board)  # metrics' values before a task's first attempt
        self.questions = questions  # what its agent asks a person, and the answers (polpo.engine.questions)
        self.space = WorkspaceFaults(store, board, self.faults)  # an agent failed by a full or read-only disk

    async def run(self, task: Task, handle: RunHandle) -> None:
        m = self.board.mission_of(task)
        with metering(await self.spend.open_meter(task.id, m.id, task.agent, task.spec, m.spec)) as meter:
            await self._turn(task, handle, meter)

    async def _turn(self, task: Task, handle: RunHandle, meter: TurnMeter) -> None:
        with anyio.CancelScope() as scope:
            handle.scope = scope
            if handle.stop_reason:
                scope.cancel()
            # the task's folder: its own worktree when isolated; its whole turn (agent + checks) is an activity there.
            # A passing fault making it (a read-only or full disk…) is waited out: the task stays pending, not failed
            ws = await self._workspace(task)
            with self.tracker.activity(ws, task.id):
                while task.status is TaskStatus.PENDING and self.spend.paused_key(task.agent) is not None:
                    await self.spend.next_day()  # a daily budget, and a source that did not park it (a cluster's)
                spent = self.spend.spent_fixed(meter)
                if spent is not None and task.status is TaskStatus.PENDING:
                    self.stops.budget_end(task, None, spent)  # starts nothing
                elif task.status is TaskStatus.REVIEW:
                    await self._resume_assessment(task, handle)
                else:
                    await self._attempt(task, handle, ws)
        if handle.stop_reason:
            self._stopped(task, handle)

    async def _workspace(self, task: Task) -> Path:
        """The task's folder; a passing fault making it (a read-only or full disk…) is waited out, the task stays
        pending meanwhile (and keeps its slot, as in an outage): never failed for it."""
        m = self.board.mission_of(task)
        isolation = self.slot_of(task).isolation
        return await retrying(self.faults, "task workspace", str(m.workspace),
                              lambda: self.isolation.prepare(m, task, isolation), mission_id=m.id, task_id=task.id)

    # -- one attempt ----------------------------------------------------------------------------------------
    async def _attempt(self, task: Task, handle: RunHandle, ws: Path) -> None:
        m = self.board.mission_of(task)
        slot = self.slot_of(task)
        n = task.attempts + 1
        kind = task.next_kind
        expectations = [e.model_dump(mode="json", by_alias=True, exclude_none=True)
                        for e in task.spec.all_expectations]
        b = budget(task.spec, m.spec, self.cfg.defaults)
        label = (f" {task.fix_attempts}/{b.max_fix_attempts}" if kind is AttemptKind.FIX
                 else f" {task.retries}/{b.max_retries}" if kind is AttemptKind.RETRY else "")
        outcomes = [o.model_dump(mode="json", by_alias=True, exclude_none=True) for o in task.spec.expected_outcomes]
        received = await self.questions.for_attempt(task, self.board.attempts.get(task.id))  # answers it waited for
        prompt = build_prompt(title=task.title, description=task.spec.description, mission_name=m.name,
                              mission_description=m.spec.description, expectations=expectations, kind=kind,
                              feedback=task.feedback, attempt_label=label, expected_outcomes=outcomes,
                              clarifications=received.clarifications)
        attempt = Attempt(id=f"{task.id}/{n}", task_id=task.id, mission_id=m.id, number=n, kind=kind, agent=task.agent,
                          status=AttemptStatus.STARTING, started_at=self.clock.now(), node=self.store.node,
                          prompt=stored_prompt(prompt, task.spec.description), model=task.model or slot.model)
        task.attempts = n
        handle.attempt = attempt
        self.board.attempts[task.id] = attempt
        tx = self.store.tx().attempt(attempt)
        self.board.transition(tx, task, Trigger.DISPATCH, attempt=n, kind=kind, agent=task.agent)
        await self.store.commit(tx)  # durable before the process exists
        if not await self.baselines.before_agent(m, task, attempt, ws):  # measured once, stored before the agent
            return await self.isolation.release(m, task, slot.ignore_files)  # could not be: the task failed
        resume = received.resume if slot.kind != "command" else None  # its conversation goes on from the question
        if received.answered is not None and resume is None:
            await self.questions.deliverer(received.answered, attempt)(None)  # this run receives the answer

        tracking = await self.tracker.open(ws, task.id, ignore=slot.ignore_files)

        def on_start(pid: int | None) -> None:
            attempt.pid = pid
            attempt.status = AttemptStatus.RUNNING
            stx = self.store.tx().attempt(attempt)
            self.board.transition(stx, task, Trigger.SPAWNED, attempt=n)
            stx.event(AgentSpawned(agent_name=task.agent, attempt=n, pid=pid, kind=kind, model=attempt.model),
                      mission_id=m.id, task_id=task.id)
            self.store.submit(stx)
            stamp_later(self.store, attempt, pid)  # its start time, once its exec is over (start_stamp)

        timeout = timeout_seconds(task.spec, slot.timeout)
        request = AgentRequest(
            task_id=task.id, mission_id=m.id, mission_name=m.name, attempt_id=attempt.id, attempt_number=n,
            kind=kind, title=task.title, description=task.spec.description, prompt=prompt,
            feedback=task.feedback, workspace=ws, timeout=timeout, expectations=expectations,
            env_marker=(ATTEMPT_MARK, attempt_mark(self.cfg.state_dir, attempt.id)), mission_goal=m.spec.description or "",
            siblings=siblings(m, task) if slot.kind == "llm" else (),  # O(tasks): only for agents that read it
            model=task.model, expected_outcomes=outcomes, clarifications=received.clarifications,
            questions_left=received.questions_left, resume=resume,
            deliver=self.questions.deliverer(resume, attempt) if resume is not None else None)
        if slot.kind == "llm":
            on_start(None)  # no process of its own: the conversation starts now
        result = await slot.agent.run(request, on_start=on_start)

        files = await self.tracker.close(tracking, tool_log=tool_log(result.transcript))
        attempt.status = AttemptStatus.FINISHED
        attempt.exit_code = result.exit_code
        attempt.signal = result.signal
        attempt.timed_out = result.timed_out
        attempt.error = redact(result.error) if result.error else None
        attempt.permanent = result.permanent
        attempt.stdout_tail = redact(result.stdout_tail)  # a command agent inherits the daemon's environment
        attempt.stderr_tail = redact(result.stderr_tail)
        attempt.stdout_bytes = result.stdout_bytes
        attempt.stderr_bytes = result.stderr_bytes
        attempt.duration = round(result.duration, 4)
        attempt.files = files
        attempt.finished_at = self.clock.now()
        attempt.model = result.model or attempt.model
        attempt.outcomes = result.outcomes or None
        attempt.tokens = result.tokens or None
        attempt.tokens_in, attempt.tokens_out = result.tokens_in or None, result.tokens_out or None
        attempt.cost = result.cost
        attempt.transcript = result.transcript
        spent = AttemptSpend.of(task.id, attempt.kind.value, attempt.agent, attempt.model, attempt.tokens,
                                attempt.tokens_in, attempt.tokens_out, attempt.cost, iso(attempt.finished_at))
        if spent is not None:
            self.board.mission_of(task).spent.attempts[attempt.id] = spent
        tx = self.store.tx().attempt(attempt)
        if result.transcript is not None:
            tx.transcript(attempt.id, task.id, redact(orjson.dumps(result.transcript).decode()))
        if task.status is TaskStatus.ASSIGNED:  # the process never started (spawn error)
            self.board.transition(tx, task, Trigger.SPAWNED, attempt=n, error=result.error)
        ids: dict[str, Any] = {"mission_id": m.id, "task_id": task.id}
        tx.event(AgentFinished(agent_name=task.agent, attempt=n, exit_code=result.exit_code,
                               duration=attempt.duration, timed_out=result.timed_out, error=attempt.error,
                               files_changed=files_count(files), files_note=files.get("note"),
                               model=attempt.model if attempt.tokens else None, tokens_in=attempt.tokens_in,
                               tokens_out=attempt.tokens_out, cost=attempt.cost, mcp=result.mcp), **ids)
        if result.timed_out:
            tx.event(TaskTimeout(elapsed=attempt.duration, timeout=timeout), **ids)
        refused = refusal()
        if refused is not None and refused in DAILY:  # a daily budget: the attempt waits for the next day
            return self.stops.interrupted(tx, task, attempt)
        if not (attempt.agent_ok or handle.stop_reason) and (code := await self.space.blamed(ws)) is not None:
            return await self.space.wait_out(tx, task, attempt, ws, code)  # a full disk: not the agent's fault
        if result.provider_error is not None:  # the model provider failed, not the agent: see engine/outage.py
            attempt.status = AttemptStatus.INTERRUPTED
            self.store.submit(tx.attempt(attempt))
            await self.outage.agent_interrupted(m, task, attempt, attempt.error or result.provider_error,
                                                retryable=result.provider_error != "auth")
            return
        if result.asks is not None:  # it stopped to ask a person: the task waits for the answer
            self.questions.ask(tx, m, task, attempt, result.asks)
            self.store.submit(tx)
            return
        self.outage.clear(task.id)
        self.board.transition(tx, task, Trigger.FINISHED, attempt=n, exit_code=result.exit_code)
        self.store.submit(tx)
        if refused is not None:  # the task's or mission's budget stopped the agent at a turn boundary
            self.stops.budget_end(task, attempt, attempt.error or "budget", hold=hold(m, refused))
            if task.terminal:  # not when it waits on hold for a larger budget; the slot read at the start: the
                await self.isolation.release(m, task, slot.ignore_files)  # finished mission's may be forgotten
            return
        if slot.asks and await self.questions.from_output(m, task, attempt):
            return  # its output is a question: it waits for the answer, and runs again with it
        await self._assess_and_decide(m, task, attempt, None)

    async def _resume_assessment(self, task: Task, handle: RunHandle) -> None:
        """After a restart: the agent's result is stored; finish its assessment without re-running it."""
        attempt = self.board.attempts[task.id]
        handle.attempt = attempt
        existing = await self.store.open_assessment(attempt.id)
        await self._assess_and_decide(self.board.mission_of(task), task, attempt, existing)

    # -- assessment and decision ----------------------------------------------------------------------------
    async def _assess_and_decide(self, m: Mission, task: Task, attempt: Attempt, existing: Assessment | None) -> None:
        if existing is None:
            existing = Assessment(id=f"{attempt.id}/1", attempt_id=attempt.id, task_id=task.id,
                                  trigger=attempt.kind, status=AssessmentStatus.RUNNING, created_at=self.clock.now())
            tx = self.store.tx().assessment(existing)
            tx.event(AssessmentStarted(attempt=attempt.number, trigger=existing.trigger,
                                       total=len(task.spec.all_expectations)), mission_id=m.id, task_id=task.id)
            self.store.submit(tx)

        async def again(a: Assessment) -> Verdict:  # a judge outage: the same assessment, its missing checks
            return await self.assessor.assess(m, task, attempt, a)

        ignore = self.slot_of(task).ignore_files  # read now: a finished mission's agents are forgotten
        await self.stops.recall(task, attempt)  # the fix loop's scores, when this node did not see them
        first = await self.stops.through_day(await self.assessor.assess(m, task, attempt, existing), again)
        if self.stops.over_budget(m, task, attempt, first):  # a call did not fit: no fix, no retry
            return await self.isolation.release(m, task, ignore) if task.terminal else None
        verdict = await self.outage.through(m, task, first, again)
        if verdict is None:
            return  # on hold until `polpo retry`
        if verdict.contestable and attempt.agent_ok and not task.judge_used and self.assessor.judge_enabled(m):
            judged = await self.stops.through_day(
                await self.assessor.judge_and_reassess(m, task, attempt, verdict), again)
            if self.stops.over_budget(m, task, attempt, judged):  # a call did not fit: no fix, no retry
                return await self.isolation.release(m, task, ignore) if task.terminal else None
            verdict = await self.outage.through(m, task, judged, again)
            if verdict is None:
                return
        if verdict.undecided is not None:  # the judge cannot tell: a person decides; nothing runs meanwhile
            return wait_for_person(self.store, self.board, task, attempt, verdict)
        if verdict.passed and attempt.agent_ok:
            verdict = await self._land(m, task, attempt, verdict, ignore)
        self._decide(m, task, attempt, verdict)
        if task.terminal:
            await self.isolation.release(m, task, ignore)

    async def _land(self, m: Mission, task: Task, attempt: Attempt, verdict: Verdict,
                    ignore: tuple[str, ...]) -> Verdict:
        """An isolated task that passed: its work merged into the mission's branch, or a conflict to fix."""
        landing = await self.isolation.land(m, task, attempt.number, attempt.agent, ignore)
        if landing is None or landing.merged:
            return verdict
        check = CheckOutcome(
            type="merge", label="merge into the mission branch", passed=False, index=len(verdict.checks),
            message=(f"your work conflicts with the mission's branch in {', '.join(landing.files)}. The mission's "
                     "branch is now merged into your workspace: resolve the conflict markers (<<<<<<<, =======, "
                     ">>>>>>>) in those files, keeping what both sides meant"),
            details=landing.message or None)
        return Verdict(False, [*verdict.checks, check], check.message)

    def _decide(self, m: Mission, task: Task, attempt: Attempt, verdict: Verdict) -> None:
        b = budget(task.spec, m.spec, self.cfg.defaults)
        counters = policy.Counters(task.retries, task.fix_attempts, task.escalation_level)
        ladder = escalation(task.spec, first_agent_is_llm=self._first_agent_is_llm(m, task))
        flat = self.stops.plateaued(m, task, attempt, verdict)
        decision = policy.decide(passed=verdict.passed, agent_ok=attempt.agent_ok, counters=counters, budget=b,
                                 side_effects=task.spec.side_effects, escalation=ladder, plateau=flat,
                                 permanent=attempt.error if attempt.permanent else None)
        if decision.action == "block":
            underlying = policy.decide(passed=verdict.passed, agent_ok=attempt.agent_ok, counters=counters,
                                       budget=b, escalation=ladder, plateau=flat)
            decision = underlying if underlying.action == "fail" else policy.Decision(
                "block", underlying.counters, f"{decision.reason}; then {underlying.action}")
            next_kind = underlying.action
        else:
            next_kind = decision.action
        feedback = feedback_text(checks=verdict.checks, exit_code=attempt.exit_code, timed_out=attempt.timed_out,
                                 error=attempt.error, stderr_tail=attempt.stderr_tail,
                                 stdout_tail=attempt.stdout_tail if self.slot_of(task).kind == "command"
                                 and not files_count(attempt.files) else "")
        failed_check = next((f"{c.type} {c.label}" for c in verdict.checks if not c.passed), None)
        why = failure_reason(verdict.checks, attempt.exit_code, attempt.timed_out, attempt.error)
        attempt.verdict = "passed" if verdict.passed and attempt.agent_ok else "failed"
        tx = self.store.tx().attempt(attempt)
        ids: dict[str, Any] = {"mission_id": m.id, "task_id": task.id}
        if next_kind != "fix":
            self.stops.scores.pop(task.id, None)  # a new fix loop (or none): the plateau counts from here
        best = self.stops.end(task.id) if decision.action in ("done", "fail") else None
        if decision.action == "done":
            task.feedback = None
            task.score = combine_scores(verdict.checks)[0]
            self.board.transition(tx, task, Trigger.PASS, attempt=attempt.number)
        elif decision.action in ("fix", "retry", "escalate", "block"):
            task.retries, task.fix_attempts = decision.counters.retries, decision.counters.fix_attempts
            task.escalation_level = decision.counters.level
            task.next_kind = AttemptKind.RETRY if next_kind == "escalate" else AttemptKind(next_kind)
            if decision.target is not None:
                self._escalate(tx, task, decision.target)
            task.feedback = feedback
            if next_kind == "fix":
                task.total_fixes += 1
            if decision.action == "block":
                tx.event(TaskRetryBlocked(reason=decision.reason), **ids)
                self.board.transition(tx, task, Trigger.BLOCK, decision.reason)
            elif next_kind == "fix":
                tx.event(TaskFix(attempt=task.fix_attempts, max_fix=b.max_fix_attempts, check=failed_check), **ids)
                self.board.transition(tx, task, Trigger.FIX, why)
            elif next_kind == "escalate":
                tx.event(TaskMaxRetries(retries=task.retries, max_retries=b.max_retries, escalating=True), **ids)
                self.board.transition(tx, task, Trigger.ESCALATE, decision.reason)
            else:
                tx.event(TaskRetry(attempt=task.retries, max_retries=b.max_retries, check=failed_check), **ids)
                self.board.transition(tx, task, Trigger.RETRY, why)
        else:
            task.feedback = feedback
            if flat and best is not None:  # the fixes stopped improving it: its best attempt's score stands
                task.score = best[0]
            tx.event(TaskMaxRetries(retries=task.retries, max_retries=b.max_retries), **ids)
            self.board.transition(tx, task, Trigger.EXHAUSTED, f"{decision.reason}: {why}")
        self.store.submit(tx)
        self.board.after_change(task)

    def _first_agent_is_llm(self, m: Mission, task: Task) -> bool:
        if task.spec.retry_policy is None:
            return False
        first = task.spec.assign_to or self.agents.default_agent(m.spec) or task.agent
        return self.agents.is_llm(m.id, m.spec, first)

    def _escalate(self, tx: Tx, task: Task, target: policy.Target) -> None:
        """Switch the task to a stronger model or its fallback agent; the next attempt records which ran it."""
        if target.kind == "model":
            task.model = target.value
        else:
            task.agent = target.value
            task.model = None
        tx.event(EscalationTriggered(level=task.escalation_level, handler=target.kind, target=target.value,
                                     agent=task.agent, model=task.model),
                 mission_id=task.mission_id, task_id=task.id)

    # -- stopped from outside -------------------------------------------------------------------------------
    def _stopped(self, task: Task, handle: RunHandle) -> None:
        """The run was stopped: a mission cancel, an SLA failure, or the daemon shutting down."""
        tx = self.store.tx()
        attempt = handle.attempt
        if attempt is not None and attempt.status.live:
            attempt.status = AttemptStatus.INTERRUPTED
            attempt.finished_at = self.clock.now()
            attempt.error = f"interrupted ({handle.stop_reason})"
            tx.attempt(attempt)
        if handle.stop_reason in (StopReason.SLA, StopReason.CANCEL) and not task.terminal:
            trigger, why = ((Trigger.SLA_FAIL, SLA_REASON) if handle.stop_reason is StopReason.SLA
                            else (Trigger.CANCEL, "mission cancelled"))
            self.board.transition(tx, task, trigger, why)
            self.store.submit(tx)
            self.board.after_change(task)
            return
        if handle.stop_reason is StopReason.SHUTDOWN and task.status in (TaskStatus.ASSIGNED, TaskStatus.IN_PROGRESS):
            self.board.transition(tx, task, Trigger.INTERRUPTED,
                                  "daemon shutting down; the attempt runs again on restart")
        self.store.submit(tx)
