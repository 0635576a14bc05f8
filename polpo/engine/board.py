"""The board: the running missions in memory and every change to their tasks' states.

Each change goes through the state machine (:mod:`polpo.engine.lifecycle`) and is written into a ``Tx`` (the
task row and its ``task:transition`` event) by :meth:`MissionBoard.transition`; building a ``Tx`` does no I/O.
:meth:`MissionBoard.after_change` applies what follows from a new state: a pending task becomes ready, a
terminal one releases or fails its dependents, closes quality gates and, when it was the last open task,
completes the mission; checkpoints and delays activate there too (:mod:`polpo.engine.holds`). Gates are
evaluated once, when their last afterTask finishes: each gate counts its open afterTasks, so a gate over A tasks
costs O(A) in total, not O(A²).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container
from typing import Protocol

from polpo.clock import Clock
from polpo.config import Config
from polpo.engine import lifecycle
from polpo.engine.gates import evaluate_gate
from polpo.engine.holds import Holds, wire_holds
from polpo.engine.lifecycle import Trigger
from polpo.engine.report import mission_report
from polpo.engine.threshold import ScoredTask, mission_threshold
from polpo.engine.trim import trim_soon
from polpo.events.catalog import (
    GateFailed,
    GatePassed,
    MissionCompleted,
    MissionResumed,
    TaskError,
    TaskTransition,
    ThresholdFailed,
)
from polpo.model.records import Attempt, Mission, Task
from polpo.model.status import AttemptStatus, GateStatus, MissionStatus, TaskStatus
from polpo.store.protocol import LoadedMission, Store
from polpo.store.tx import Tx

log = logging.getLogger("polpo.engine")

__all__ = ["CompletionHooks", "MissionBoard", "refresh", "wire"]

# a task's turn: dispatched, its agent running, its checks running. Outside it the task keeps no parsed spec.
_TURN = frozenset({TaskStatus.ASSIGNED, TaskStatus.IN_PROGRESS, TaskStatus.REVIEW})


class CompletionHooks(Protocol):
    """What else must be recorded when a task or a mission finishes (the SLA keeper's ``met`` marks)."""

    def on_task_terminal(self, tx: Tx, task: Task, mission: Mission) -> None: ...

    def on_mission_complete(self, tx: Tx, mission: Mission) -> None: ...


class MissionBoard:
    def __init__(self, cfg: Config, store: Store, clock: Clock, *, on_ready: Callable[[Task], None],
                 on_forget: Callable[[Mission], None]) -> None:
        self.cfg = cfg
        self.store = store
        self.clock = clock
        self.on_ready = on_ready
        self.on_forget = on_forget
        self.hooks: CompletionHooks | None = None
        self.missions: dict[str, Mission] = {}  # the running and cancelling missions this node decides for
        self.tasks: dict[str, Task] = {}  # tasks of those missions
        # missions another node leads, of which this node runs a task's turn (with several daemons): read once,
        # kept while open; nothing is decided on them here (the leader follows the turn from its events)
        self.visiting: dict[str, Mission] = {}
        self.attempts: dict[str, Attempt] = {}  # latest attempt of each task that is not terminal
        self.holds = Holds(store, clock, self.missions, self.make_ready)  # checkpoints and delays
        # approval "before": True when a task that could start must wait for a person (polpo.engine.people)
        self.ask_approval: Callable[[Task], bool] | None = None

    # -- membership -----------------------------------------------------------------------------------------
    def add(self, m: Mission) -> None:
        self.missions[m.id] = m
        for t in m.tasks.values():
            self.tasks[t.id] = t

    def adopt(self, loaded: LoadedMission) -> Mission:
        """A mission read back from the store: wired and added, with its open tasks' latest attempts."""
        m = loaded.mission
        wire(m)
        self.add(m)
        for task_id, attempt in loaded.attempts.items():
            if not m.tasks[task_id].terminal:
                self.attempts[task_id] = attempt
        return m

    def visit(self, loaded: LoadedMission) -> Mission:
        """A mission another node leads, read for a turn on one of its tasks."""
        m = loaded.mission
        wire(m)
        self.visiting[m.id] = m
        return m

    def resume(self, tx: Tx, m: Mission, by: str, task_id: str) -> None:
        """A finished mission runs again because a person brought ``task_id`` back (a retry, a pass): in ``tx``."""
        if m.status is MissionStatus.RUNNING:
            return
        m.status = MissionStatus.RUNNING
        m.finished_at = None
        m.report = None
        tx.mission(m)
        tx.event(MissionResumed(by=by, task_id=task_id), mission_id=m.id)

    def forget(self, m: Mission) -> None:
        """A finished mission leaves memory: its records go, and the heap's freed pages with them (trim)."""
        self.missions.pop(m.id, None)
        for tid in m.tasks:
            self.tasks.pop(tid, None)
            self.attempts.pop(tid, None)
        self.on_forget(m)
        trim_soon()

    def leave(self, mission_id: str) -> None:
        """A visited mission finished (its leader said so): the copy and its resolved agents go."""
        m = self.visiting.pop(mission_id, None)
        if m is not None:
            for tid in m.tasks:
                self.attempts.pop(tid, None)
            self.on_forget(m)

    def step_down(self, running: Container[str]) -> None:
        """This node no longer decides for any mission (its leadership was lost): each becomes a visited copy at
        once, so nothing more is decided here; the turns still running keep their objects and write only their
        own task's row. A later election loads and settles them again."""
        self.visiting.update(self.missions)
        self.missions.clear()
        self.tasks.clear()
        for tid in [t for t in self.attempts if t not in running]:
            del self.attempts[tid]

    def find(self, mission_id: str) -> Mission | None:
        """A mission this node decides for or visits (its own notification rules, for example)."""
        return self.missions.get(mission_id) or self.visiting.get(mission_id)

    def mission_of(self, task: Task) -> Mission:
        return self.missions.get(task.mission_id) or self.visiting[task.mission_id]

    # -- transitions ----------------------------------------------------------------------------------------
    def transition(self, tx: Tx, task: Task, trigger: Trigger, reason: str | None = None, *,
                   attempt: int | None = None, kind: str | None = None, agent: str | None = None,
                   exit_code: int | None = None, error: str | None = None) -> None:
        """Apply a state-machine step to ``task`` and record it (row + ``task:transition``) in ``tx``."""
        old = task.status
        task.status = lifecycle.next_state(old, trigger)
        now = self.clock.now()
        task.updated_at = now
        task.reason = reason
        task.waiting_for = lifecycle.waiting_for(old, trigger)
        if task.status is TaskStatus.ASSIGNED and task.started_at is None:
            task.started_at = now
        if task.terminal:
            task.finished_at = now
        elif old.terminal:
            task.finished_at = None
        if task.status not in _TURN:
            task.drop_spec()  # the turn is over: the spec goes back to being JSON in the mission's document
        tx.task(task)
        tx.event(TaskTransition(from_=old, to=task.status, trigger=trigger, reason=reason, attempt=attempt,
                                kind=kind, agent=agent, exit_code=exit_code, error=error),
                 mission_id=task.mission_id, task_id=task.id)

    def after_change(self, task: Task) -> None:
        """Follow-ups of a task's new state: readiness, cascades, gates, mission completion.

        Only for a mission this node decides for: a turn on a mission another node leads changes the task's row,
        and the leader follows it from the events and decides what it means for the mission, once."""
        if task.mission_id not in self.missions:
            if task.terminal:
                self.attempts.pop(task.id, None)
            return
        if task.status is TaskStatus.PENDING:
            self.make_ready(task)
        elif task.terminal:
            self._on_terminal(task)

    def make_ready(self, task: Task) -> None:
        if task.status is TaskStatus.PENDING and task.waiting_on == 0:
            if self.ask_approval is not None and self.ask_approval(task):
                return
            task.drop_spec()  # a queued task waits as JSON, whoever read its spec meanwhile
            self.on_ready(task)

    def _on_terminal(self, first: Task) -> None:
        m = self.missions.get(first.mission_id)
        if m is None:
            return
        work = [first]
        tx = self.store.tx().decided()
        while work:
            task = work.pop()
            if task.id in m.closed:  # decided already (a recovery that reads a finish the leader had followed)
                continue
            m.closed.add(task.id)
            m.open_tasks -= 1
            self.attempts.pop(task.id, None)  # a finished task's attempt leaves memory (it is in the store)
            if self.hooks is not None:
                self.hooks.on_task_terminal(tx, task, m)
            for dep_id in task.dependents:
                dep = m.tasks[dep_id]
                if task.status is TaskStatus.DONE:
                    dep.waiting_on -= 1
                    self.make_ready(dep)
                elif dep.status is TaskStatus.PENDING:
                    self.transition(tx, dep, Trigger.DEPENDENCY_FAILED, f"dependency failed: {task.title}")
                    work.append(dep)
            for gate_name in m.gates_after.get(task.title, ()):
                m.gate_pending[gate_name] -= 1
                if m.gate_pending[gate_name] <= 0:
                    work.extend(self._close_gate(tx, m, gate_name))
            self.holds.after_terminal(tx, m, task)
        self.store.submit(tx)
        if m.open_tasks <= 0:
            self.complete_mission(m)

    # -- gates ----------------------------------------------------------------------------------------------
    def _close_gate(self, tx: Tx, m: Mission, gate_name: str) -> list[Task]:
        """Decide a gate whose afterTasks all finished; returns the blocked tasks it failed."""
        if m.gate_state.get(gate_name, GateStatus.WAITING) is not GateStatus.WAITING:
            return []
        gate = next(g for g in m.spec.quality_gates if g.name == gate_name)
        after = {title: t for title in gate.after_tasks if (t := m.task_by_title(title)) is not None}
        verdict = evaluate_gate(gate, {title: (t.status, t.score) for title, t in after.items()})
        if verdict.status == "waiting":  # an afterTask was re-opened meanwhile; its end counts down again
            return []
        status = GateStatus(verdict.status)
        m.gate_state[gate_name] = status
        tx.gate(m.id, gate_name, status, verdict.reason, verdict.avg_score, self.clock.now())
        channels = list(gate.notify_channels) or None
        avg = round(verdict.avg_score, 3) if verdict.avg_score is not None else None
        failed: list[Task] = []
        if status is GateStatus.PASSED:
            tx.event(GatePassed(mission_id=m.id, gate_name=gate_name, notify_channels=channels, avg_score=avg),
                     mission_id=m.id)
            for title in gate.blocks_tasks:
                t = m.task_by_title(title)
                if t is not None:
                    t.waiting_on -= 1
                    self.make_ready(t)
        else:
            tx.event(GateFailed(mission_id=m.id, gate_name=gate_name, reason=verdict.reason,
                                notify_channels=channels, avg_score=avg), mission_id=m.id)
            for title in gate.blocks_tasks:
                t = m.task_by_title(title)
                if t is not None and t.status is TaskStatus.PENDING:
                    self.transition(tx, t, Trigger.GATE_FAILED,
                                    f"quality gate {gate_name!r} failed: {verdict.reason}")
                    failed.append(t)
        return failed

    def settle_gates(self, m: Mission) -> None:
        """Decide the waiting gates whose afterTasks are all finished already (after a retry re-wired them)."""
        tx = self.store.tx().decided()
        failed: list[Task] = []
        for g in m.spec.quality_gates:
            if m.gate_pending.get(g.name, 0) <= 0:
                failed.extend(self._close_gate(tx, m, g.name))
        self.holds.settle(tx, m)
        self.store.submit(tx)
        for t in failed:
            self.after_change(t)

    # -- completion -----------------------------------------------------------------------------------------
    def complete_mission(self, m: Mission) -> None:
        if not m.status.open:
            return
        now = self.clock.now()
        tasks = list(m.tasks.values())
        all_done = all(t.status is TaskStatus.DONE for t in tasks)
        limit = m.spec.quality_threshold if m.spec.quality_threshold is not None else \
            self.cfg.defaults.quality_threshold
        quality = mission_threshold([ScoredTask(t.title, t.status, t.score, t.priority) for t in tasks], limit)
        below = quality.passed is False
        if m.status is MissionStatus.CANCELLING:
            outcome = MissionStatus.CANCELLED
        else:
            outcome = MissionStatus.COMPLETED if all_done and not below else MissionStatus.FAILED
        m.status = outcome
        m.finished_at = now
        m.report = mission_report(m, tasks, now)
        m.report["quality"] = {"average": None if quality.avg_score is None else round(quality.avg_score, 4),
                               "kind": "priority-weighted average of the scores of done tasks with an llm_review",
                               "threshold": limit, "passed": quality.passed, "explanation": quality.explanation}
        if below and all_done:
            m.report["summary"] += f"; quality threshold not met ({quality.avg_score:.2f} < {limit:g})"
        m.reason = None if outcome is MissionStatus.COMPLETED else m.report.get("summary")
        tx = self.store.tx().decided().mission(m)
        if below and limit is not None:
            tx.event(ThresholdFailed(avg_score=round(quality.avg_score or 0, 4), threshold=limit), mission_id=m.id)
        if self.hooks is not None:
            self.hooks.on_mission_complete(tx, m)
        tx.event(MissionCompleted(outcome=outcome, all_passed=all_done and not below, report=m.report),
                 mission_id=m.id)
        self.store.submit(tx)
        self.forget(m)

    # -- a bug while handling a task ------------------------------------------------------------------------
    def fail_internal(self, task: Task, error: str, where: str) -> None:
        """A polpo bug hit this task: it fails with the error and an event; every other task goes on."""
        if task.terminal or (task.mission_id not in self.missions and task.mission_id not in self.visiting):
            return
        tx = self.store.tx()
        attempt = self.attempts.get(task.id)
        if attempt is not None and attempt.status.live:
            attempt.status = AttemptStatus.INTERRUPTED
            attempt.error = f"internal error: {error}"
            attempt.finished_at = self.clock.now()
            tx.attempt(attempt)
        tx.event(TaskError(error=error, where=where), mission_id=task.mission_id, task_id=task.id)
        self.transition(tx, task, Trigger.INTERNAL_ERROR, f"internal error in polpo ({where}): {error}")
        self.store.submit(tx)
        self.after_change(task)


_STORED = ("status", "reason", "attempts", "retries", "fix_attempts", "total_fixes", "interruptions", "next_kind",
           "feedback", "started_at", "finished_at", "score", "escalation_level", "model", "judge_used",
           "expectations", "agent", "updated_at", "waiting_for")


def refresh(dst: Task, src: Task) -> None:
    """Copy a task's stored state into the board's object (runners and the board keep references to it): the
    task's last turn may have run on another node."""
    for name in _STORED:
        setattr(dst, name, getattr(src, name))


def wire(m: Mission) -> None:
    """Derive dependency links, gate counters and waiting counts from the tasks' current states."""
    by_title = {t.title: t for t in m.tasks.values()}
    by_idx = {t.idx: t for t in m.tasks.values()}
    dependents: dict[str, list[str]] = {}
    for t in m.tasks.values():
        deps = m.doc.deps(t.idx)
        t.deps = tuple(by_idx[i].id for i in deps if i in by_idx) if deps else ()
        for d in t.deps:
            dependents.setdefault(d, []).append(t.id)
    for t in m.tasks.values():
        t.dependents = tuple(dependents.get(t.id, ()))
    blocked: dict[str, list[str]] = {}
    m.gates_after = {}
    m.gate_pending = {}
    for g in m.spec.quality_gates:
        for title in g.blocks_tasks:
            if title in by_title:
                blocked.setdefault(title, []).append(g.name)
        after = [by_title[a] for a in dict.fromkeys(g.after_tasks) if a in by_title]
        m.gate_pending[g.name] = sum(1 for t in after if not t.terminal)
        for t in after:
            m.gates_after.setdefault(t.title, []).append(g.name)
    held = wire_holds(m)
    for t in m.tasks.values():
        t.gates = tuple(blocked.get(t.title, ()))
        t.waiting_on = sum(1 for d in t.deps if m.tasks[d].status is not TaskStatus.DONE) + sum(
            1 for g in t.gates if m.gate_state.get(g, GateStatus.WAITING) is not GateStatus.PASSED) + held.get(
            t.title, 0)
    m.closed = {t.id for t in m.tasks.values() if t.terminal}
    m.open_tasks = len(m.tasks) - len(m.closed)
