"""The engine: missions in memory, the dispatcher loop, and every state change they go through.

Event-driven: accepting a mission, finishing a task, a freed slot or a command wakes the dispatcher at once;
there is no polling interval on a task's path. Each change is written as a ``Tx`` (state, then the event in
the same transaction) before anything acts on it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from polpo.agents.registry import AgentFactory, AgentSlot
from polpo.clock import Clock, iso
from polpo.config import Config
from polpo.engine import lifecycle, policy
from polpo.engine.gates import evaluate_gate
from polpo.engine.model import Attempt, Mission, Task
from polpo.engine.ready import ReadyQueue
from polpo.engine.report import mission_report
from polpo.engine.sla import SLA_REASON, SlaKeeper
from polpo.engine.threshold import ScoredTask, mission_threshold
from polpo.events import catalog as E
from polpo.mission.schema import MissionSpec
from polpo.store.sqlite import Store, Tx

log = logging.getLogger("polpo.engine")

_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


def slugify(stem: str) -> str:
    return _SLUG.sub("-", stem).strip("-.") or "mission"


@dataclass
class RunHandle:
    task_id: str
    keys: list[str]
    scope: anyio.CancelScope | None = None
    stop_reason: str | None = None  # cancel | shutdown | sla
    attempt: Attempt | None = None


@dataclass
class SourceInfo:
    hash: str
    outcome: str  # accepted | rejected | busy
    mission_id: str | None


@dataclass
class Engine:
    cfg: Config
    store: Store
    clock: Clock
    agents: AgentFactory
    missions: dict[str, Mission] = field(default_factory=dict)  # active missions only
    tasks: dict[str, Task] = field(default_factory=dict)  # tasks of active missions
    attempts: dict[str, Attempt] = field(default_factory=dict)  # latest attempt per active task
    sources: dict[str, SourceInfo] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)  # source path -> last run number
    mission_ids: set[str] = field(default_factory=set)
    next_seq: int = 1
    running: dict[str, RunHandle] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.queue = ReadyQueue(self.cfg.daemon.max_concurrency)
        self._wake = anyio.Event()
        self._tg: TaskGroup | None = None
        self.stopping = False
        self._slots: dict[str, AgentSlot] = {}
        self.idle = anyio.Event()
        self.resuming: set[str] = set()
        self._all_released = anyio.Event()  # tasks in review whose checks resume after a restart
        self.sla = SlaKeeper(self)
        self.channel_names: set[str] | None = None  # notification channels, for checking gates' notifyChannels

    # -- wiring -----------------------------------------------------------------------------------------
    def wake(self) -> None:
        self._wake.set()

    async def run(self, tg: TaskGroup) -> None:
        """The dispatcher loop: start every startable task each time something changes."""
        from polpo.engine.runner import run_task

        self._tg = tg
        while not self.stopping:
            self._wake = anyio.Event()
            while not self.stopping:
                task_id = self.queue.pop_startable(self._is_ready, self._limits_of)
                if task_id is None:
                    break
                self.resuming.discard(task_id)
                task = self.tasks[task_id]
                handle = RunHandle(task_id, [k for k, _ in self._limits_of(task_id)])
                self.running[task_id] = handle
                self.queue.started(handle.keys)
                tg.start_soon(self._guarded, run_task, self, task, handle, name=f"task {task_id}")
            if not self.running and not self.missions:
                self.idle.set()
            await self._wake.wait()

    async def _guarded(self, fn: Any, *args: Any) -> None:
        try:
            await fn(*args)
        except Exception:
            log.exception("task runner crashed")
            raise

    def release(self, handle: RunHandle) -> None:
        self.running.pop(handle.task_id, None)
        self.queue.finished(handle.keys)
        if not self.running:
            self._all_released.set()
        self.wake()

    def slot(self, task: Task) -> AgentSlot:
        key = f"{task.mission_id}\0{task.agent}"
        s = self._slots.get(key)
        if s is None:
            m = self.missions[task.mission_id]
            s = self.agents.resolve(m.id, m.spec, task.agent)
            self._slots[key] = s
        return s

    def _is_ready(self, task_id: str) -> bool:
        t = self.tasks.get(task_id)
        if t is None or task_id in self.running or self.missions[t.mission_id].status != "running":
            return False
        if task_id in self.resuming:
            return t.status == "review"
        return t.status == "pending" and t.waiting_on == 0

    def _limits_of(self, task_id: str) -> list[tuple[str, int | None]]:
        t = self.tasks[task_id]
        s = self.slot(t)
        m = self.missions[t.mission_id]
        return [(f"agent:{s.limit_key}", s.max_concurrency),
                (f"mission:{m.id}", m.spec.settings.max_concurrency)]

    def make_ready(self, task: Task) -> None:
        if task.status == "pending" and task.waiting_on == 0:
            m = self.missions[task.mission_id]
            self.queue.push(task.spec.priority, m.seq, task.idx, task.id)
            self.wake()

    # -- transitions --------------------------------------------------------------------------------------
    def transition(self, tx: Tx, task: Task, trigger: str, reason: str | None = None,
                   **extra: Any) -> None:
        """Apply a state-machine step to ``task`` and record it (row + ``task:transition``) in ``tx``."""
        old = task.status
        task.status = lifecycle.next_state(old, trigger)
        now = self.clock.now()
        task.updated_at = now
        task.reason = reason
        if task.status == "assigned" and task.started_at is None:
            task.started_at = now
        if task.terminal:
            task.finished_at = now
        elif old in lifecycle.STATES and lifecycle.is_terminal(old):
            task.finished_at = None
        tx.task(task)
        data: dict[str, Any] = {"from": old, "to": task.status, "trigger": trigger}
        if reason:
            data["reason"] = reason
        data.update(extra)
        tx.event(E.TASK_TRANSITION, mission_id=task.mission_id, task_id=task.id, **data)

    def after_change(self, task: Task) -> None:
        """Follow-ups of a task's new state: readiness, cascades, gates, mission completion."""
        if task.status == "pending":
            self.make_ready(task)
        elif task.terminal:
            self._on_terminal(task)

    def _on_terminal(self, first: Task) -> None:
        m = self.missions.get(first.mission_id)
        if m is None:
            return
        work = [first]
        tx = self.store.tx()
        while work:
            task = work.pop()
            m.open_tasks -= 1
            self.sla.on_task_terminal(tx, task)
            for dep_id in task.dependents:
                dep = self.tasks[dep_id]
                if task.status == "done":
                    dep.waiting_on -= 1
                    self.make_ready(dep)
                elif dep.status == "pending":
                    self.transition(tx, dep, "dependency_failed", f"dependency failed: {task.title}")
                    work.append(dep)
            for gate_name in self._gates_after(m, task.title):
                work.extend(self._evaluate_gate(tx, m, gate_name))
        self.store.submit(tx)
        if m.open_tasks <= 0:
            self.complete_mission(m)

    # -- gates ----------------------------------------------------------------------------------------
    def _gates_after(self, m: Mission, title: str) -> list[str]:
        return [g.name for g in m.spec.quality_gates if title in g.after_tasks]

    def _evaluate_gate(self, tx: Tx, m: Mission, gate_name: str) -> list[Task]:
        """Evaluate a gate once all its afterTasks are terminal; returns tasks it failed."""
        if m.gate_state.get(gate_name, "waiting") != "waiting":
            return []
        gate = next(g for g in m.spec.quality_gates if g.name == gate_name)
        after = [t for title in gate.after_tasks if (t := m.task_by_title(title)) is not None]
        states = {t.title: t.status for t in after}  # only the gate's tasks: O(afterTasks), not O(mission)
        scores = {t.title: t.score for t in after}
        verdict = evaluate_gate(after_tasks=gate.after_tasks, states=states, scores=scores,
                                min_score=gate.min_score, require_all_passed=gate.require_all_passed)
        if verdict.status == "waiting":
            return []
        m.gate_state[gate_name] = verdict.status
        tx.gate((m.id, gate_name, verdict.status, verdict.reason, verdict.avg_score, iso(self.clock.now())))
        data: dict[str, Any] = {"missionId": m.id, "gateName": gate_name}
        if gate.notify_channels:
            data["notifyChannels"] = list(gate.notify_channels)
        if verdict.avg_score is not None:
            data["avgScore"] = round(verdict.avg_score, 3)
        failed: list[Task] = []
        if verdict.status == "passed":
            tx.event(E.QUALITY_GATE_PASSED, mission_id=m.id, **data)
            for title in gate.blocks_tasks:
                t = m.task_by_title(title)
                if t is not None:
                    t.waiting_on -= 1
                    self.make_ready(t)
        else:
            tx.event(E.QUALITY_GATE_FAILED, mission_id=m.id, reason=verdict.reason, **data)
            for title in gate.blocks_tasks:
                t = m.task_by_title(title)
                if t is not None and t.status == "pending":
                    self.transition(tx, t, "gate_failed", f"quality gate {gate_name!r} failed: {verdict.reason}")
                    failed.append(t)
        return failed

    # -- missions -----------------------------------------------------------------------------------------
    def new_mission_id(self, source: str) -> tuple[str, int]:
        run = self.runs.get(source, 0) + 1
        base = slugify(Path(source).stem)
        mid = base if run == 1 else f"{base}#{run}"
        n = 2
        while mid in self.mission_ids:
            mid = f"{base}-{n}" if run == 1 else f"{base}-{n}#{run}"
            n += 1
        return mid, run

    def active_for_source(self, source: str) -> Mission | None:
        return next((m for m in self.missions.values() if m.source == source), None)

    def workspace_for(self, mid: str, spec: MissionSpec, source: str) -> Path:
        if spec.workspace:
            ws = Path(spec.workspace)
            return ws if ws.is_absolute() else (Path(source).parent / ws).resolve()
        return self.cfg.state_dir / "workspaces" / mid.replace("#", "-")

    def build_mission(self, *, mid: str, run: int, spec: MissionSpec, source: str, digest: str,
                      warnings: list[str], status: str = "running") -> Mission:
        now = self.clock.now()
        m = Mission(id=mid, seq=self.next_seq, name=spec.name or Path(source).stem, source=source,
                    hash=digest, run=run, spec=spec, workspace=self.workspace_for(mid, spec, source),
                    status=status, created_at=now, warnings=warnings)
        self.next_seq += 1
        only_agent = self._only_agent(spec)
        for i, ts in enumerate(spec.tasks):
            t = Task(id=f"{mid}:{i + 1}", mission_id=mid, idx=i, title=ts.title,
                     agent=ts.assign_to or only_agent or "", spec=ts, status="pending", updated_at=now)
            m.tasks[t.id] = t
        self.wire(m)
        return m

    def _only_agent(self, spec: MissionSpec) -> str | None:
        names = {a.name for a in spec.team} | set(self.agents.known_names())
        return next(iter(names)) if len(names) == 1 else None

    def wire(self, m: Mission) -> None:
        """Derive dependency links, gate blocks and waiting counts from the tasks' current states."""
        by_title = {t.title: t for t in m.tasks.values()}
        for t in m.tasks.values():
            t.deps = [by_title[d].id for d in t.spec.depends_on if d in by_title]
            t.dependents = []
            t.gates = []
        for t in m.tasks.values():
            for d in t.deps:
                m.tasks[d].dependents.append(t.id)
        for g in m.spec.quality_gates:
            for title in g.blocks_tasks:
                if title in by_title:
                    by_title[title].gates.append(g.name)
        for t in m.tasks.values():
            t.waiting_on = sum(1 for d in t.deps if m.tasks[d].status != "done") + sum(
                1 for g in t.gates if m.gate_state.get(g, "waiting") != "passed")
        m.open_tasks = sum(1 for t in m.tasks.values() if not t.terminal)

    def add_mission(self, m: Mission) -> None:
        self.missions[m.id] = m
        self.mission_ids.add(m.id)
        self.runs[m.source] = max(self.runs.get(m.source, 0), m.run)
        for t in m.tasks.values():
            self.tasks[t.id] = t
        self.idle = anyio.Event()

    async def accept(self, *, spec: MissionSpec, source: str, digest: str, warnings: list[str],
                     spec_json: str) -> Mission:
        mid, run = self.new_mission_id(source)
        m = self.build_mission(mid=mid, run=run, spec=spec, source=source, digest=digest, warnings=warnings)
        await anyio.to_thread.run_sync(lambda: m.workspace.mkdir(parents=True, exist_ok=True))
        tx = self.store.tx().mission(m, spec_json)
        for t in m.tasks.values():
            tx.task(t)
        self.sources[source] = SourceInfo(digest, "accepted", mid)
        tx.source((source, digest, "accepted", mid, iso(m.created_at)))
        tx.event(E.MISSION_ACCEPTED, mission_id=mid, name=m.name, file=source, hash=digest, run=run,
                 taskCount=len(m.tasks), workspace=str(m.workspace), warnings=warnings)
        for t in m.tasks.values():
            tx.event(E.TASK_CREATED, mission_id=mid, task_id=t.id, title=t.title, agent=t.agent,
                     dependsOn=t.deps, priority=t.spec.priority)
        self.add_mission(m)
        await self.store.commit(tx)
        for t in m.tasks.values():
            self.make_ready(t)
        return m

    def complete_mission(self, m: Mission) -> None:
        if m.status != "running" and m.status != "cancelling":
            return
        now = self.clock.now()
        tasks = list(m.tasks.values())
        all_done = all(t.status == "done" for t in tasks)
        limit = m.spec.quality_threshold if m.spec.quality_threshold is not None else \
            self.cfg.defaults.quality_threshold
        quality = mission_threshold([ScoredTask(t.title, t.status, t.score, t.spec.priority) for t in tasks], limit)
        below = quality.passed is False
        outcome = "cancelled" if m.status == "cancelling" else (
            "completed" if all_done and not below else "failed")
        m.status = outcome
        m.finished_at = now
        m.report = mission_report(m, tasks, self._attempt_counts(tasks), now)
        m.report["quality"] = {"average": None if quality.avg_score is None else round(quality.avg_score, 4),
                               "kind": "priority-weighted average of the scores of done tasks with an llm_review",
                               "threshold": limit, "passed": quality.passed, "explanation": quality.explanation}
        if below and all_done:
            m.report["summary"] += f"; quality threshold not met ({quality.avg_score:.2f} < {limit:g})"
        m.reason = None if outcome == "completed" else m.report.get("summary")
        tx = self.store.tx().mission(m)
        if below:
            tx.event(E.QUALITY_THRESHOLD_FAILED, mission_id=m.id, avgScore=round(quality.avg_score or 0, 4),
                     threshold=limit)
        self.sla.on_mission_complete(tx, m)
        tx.event(E.MISSION_COMPLETED, mission_id=m.id, outcome=outcome, allPassed=all_done and not below,
                 report=m.report)
        self.store.submit(tx)
        self.forget(m)

    def _attempt_counts(self, tasks: Iterable[Task]) -> dict[str, int]:
        tasks = list(tasks)
        return {"attempts": sum(t.attempts for t in tasks), "fixes": sum(t.total_fixes for t in tasks),
                "retries": sum(t.retries for t in tasks)}

    def forget(self, m: Mission) -> None:
        self.missions.pop(m.id, None)
        for tid in m.tasks:
            self.tasks.pop(tid, None)
            self.attempts.pop(tid, None)
        for key in [k for k in self._slots if k.startswith(f"{m.id}\0")]:
            del self._slots[key]
        self.wake()

    # -- commands -------------------------------------------------------------------------------------
    def fail_for_sla(self, t: Task) -> None:
        """``violation_action = "fail"``: the task fails through the state machine, its agent is killed, no retry."""
        if t.terminal:
            return
        handle = self.running.get(t.id)
        if handle is not None:
            handle.stop_reason = "sla"
            if handle.scope is not None:
                handle.scope.cancel()  # the runner kills the process group and records the failure
            return
        tx = self.store.tx()
        self.transition(tx, t, "sla_fail", SLA_REASON)
        self.store.submit(tx)
        self.after_change(t)

    def cancel_mission(self, mid: str, by: str = "user") -> str:
        m = self.missions.get(mid)
        if m is None:
            raise CommandRefused(f"mission {mid!r} is not running")
        m.status = "cancelling"
        tx = self.store.tx().mission(m)
        tx.event(E.MISSION_CANCELLED, mission_id=m.id, by=by)
        for t in m.tasks.values():
            handle = self.running.get(t.id)
            if handle is not None:
                handle.stop_reason = "cancel"
                if handle.scope is not None:
                    handle.scope.cancel()
            elif not t.terminal:
                self.transition(tx, t, "cancel", "mission cancelled")
                m.open_tasks -= 1
        self.store.submit(tx)
        if m.open_tasks <= 0:
            self.complete_mission(m)
        return f"cancelling mission {mid}"

    async def retry_task(self, task_id: str) -> str:
        m = await self.ensure_loaded(task_id.rsplit(":", 1)[0])
        task = m.tasks.get(task_id) if m else None
        if m is None or task is None:
            raise CommandRefused(f"no task {task_id!r}")
        if task.status != "failed":
            raise CommandRefused(f"task {task_id} is {task.status}; only failed tasks can be retried")
        reopened_mission = m.status != "running"
        tx = self.store.tx()
        if reopened_mission:
            m.status = "running"
            m.finished_at = None
            m.report = None
            tx.mission(m)
            tx.event(E.MISSION_RESUMED, mission_id=m.id, by="retry", taskId=task_id)
        task.retries = task.fix_attempts = task.interruptions = 0
        task.next_kind = "retry"
        self.transition(tx, task, "manual_retry", "retried by user")
        tx.event(E.TASK_RETRY, mission_id=m.id, task_id=task.id, attempt=1, maxRetries=self.budget(task)[0],
                 manual=True)
        reopened = self._reopen_cascade(tx, m)
        self.wire(m)
        self.store.submit(tx)
        for t in [task, *reopened]:
            self.make_ready(t)
        return f"retrying {task_id}" + (f" (and {len(reopened)} task(s) that waited on it)" if reopened else "")

    def _reopen_cascade(self, tx: Tx, m: Mission) -> list[Task]:
        """Re-open tasks that failed only because of a dependency or a gate, and reset failed gates."""
        for g in m.spec.quality_gates:
            if m.gate_state.get(g.name) == "failed":
                m.gate_state[g.name] = "waiting"
                tx.gate((m.id, g.name, "waiting", "re-opened by a retry", None, iso(self.clock.now())))
        out = []
        for t in m.tasks.values():
            if t.status == "failed" and t.reason and t.reason.startswith(("dependency failed", "quality gate")):
                t.retries = t.fix_attempts = 0
                self.transition(tx, t, "reopen", "re-opened: what it waited on is being retried")
                out.append(t)
        return out

    def approve_task(self, task_id: str) -> str:
        task = self.tasks.get(task_id)
        if task is None:
            raise CommandRefused(f"no running task {task_id!r}")
        if task.status != "awaiting_approval":
            raise CommandRefused(f"task {task_id} is {task.status}, not awaiting approval")
        tx = self.store.tx()
        tx.event(E.TASK_APPROVED, mission_id=task.mission_id, task_id=task.id, next=task.next_kind)
        self.transition(tx, task, "approve", "approved by user")
        self.store.submit(tx)
        self.make_ready(task)
        return f"approved {task_id}: its {task.next_kind} runs next"

    async def ensure_loaded(self, mid: str) -> Mission | None:
        if mid in self.missions:
            return self.missions[mid]
        from polpo.engine.recovery import load_mission

        m = await load_mission(self, mid)
        if m is not None:
            self.add_mission(m)
        return m

    # -- budgets --------------------------------------------------------------------------------------
    def budget(self, task: Task) -> tuple[int, int]:
        m = self.missions[task.mission_id]
        d = self.cfg.defaults
        max_retries = task.spec.max_retries
        if max_retries is None:
            max_retries = m.spec.settings.max_retries if m.spec.settings.max_retries is not None else d.max_retries
        max_fix = task.spec.max_fix_attempts
        if max_fix is None:
            s = m.spec.settings.max_fix_attempts
            max_fix = s if s is not None else d.max_fix_attempts
        return max_retries, max_fix

    def escalation_for(self, task: Task) -> policy.Escalation:
        """The task's escalation ladder (``retryPolicy``); a model step only for an LLM agent."""
        rp = task.spec.retry_policy
        if rp is None:
            return policy.NO_ESCALATION
        spec = self.missions[task.mission_id].spec
        first = task.spec.assign_to or self._only_agent(spec) or task.agent
        original = self.agents.resolve(task.mission_id, spec, first)
        targets = policy.escalation_targets(escalate_model=rp.escalate_model, fallback_agent=rp.fallback_agent,
                                            agent_is_llm=original.kind == "llm")
        return policy.Escalation(targets, rp.escalate_after)

    def timeout_for(self, task: Task) -> float | None:
        if task.spec.max_duration is not None:
            return task.spec.max_duration.total_seconds()
        return self.slot(task).timeout

    # -- shutdown -------------------------------------------------------------------------------------
    async def stop(self, grace: float) -> None:
        """Stop dispatching; give running agents ``grace`` seconds, then kill what is left."""
        self.stopping = True
        self.wake()
        if not self.running:
            return
        self._all_released = anyio.Event()
        with anyio.move_on_after(grace):
            await self._all_released.wait()
        for handle in list(self.running.values()):
            handle.stop_reason = handle.stop_reason or "shutdown"
            if handle.scope is not None:
                handle.scope.cancel()
        if self.running:
            await self._all_released.wait()


class CommandRefused(Exception):
    """A command (retry, cancel, approve) that does not apply; the message says why."""
