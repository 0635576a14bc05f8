"""What a person says to running work besides cancel and retry: resume a checkpoint, approve or reject a task
that waits for approval before its first attempt, override a verdict.

**Approval before a task** (``"approval": "before"``): when such a task could first start, the board asks
:meth:`People.ask` instead of queueing it; the task goes to ``awaiting_approval`` (the status sideEffects re-runs
use) with ``approval:requested``, which names the commands that approve and reject it. The request is a hold of
kind ``approval`` in the store (:mod:`polpo.model.holds`), so a restart neither asks twice nor forgets a granted
approval, and ``approvalTimeout`` is an expiry the leader's timer reads with the injected clock:
``approvalTimeoutAction`` ``fail`` (the default) fails the task, ``approve`` lets it run.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from polpo.clock import Clock, iso
from polpo.engine.board import MissionBoard
from polpo.engine.lifecycle import Trigger
from polpo.engine.overrides import override_verdict
from polpo.engine.refused import Refused
from polpo.events.catalog import ApprovalRequested, ApprovalResolved, TaskApproved
from polpo.model.holds import HoldKind, HoldState, HoldStatus
from polpo.model.records import Task
from polpo.model.status import MissionStatus, TaskStatus
from polpo.store.protocol import Store

log = logging.getLogger("polpo.commands")

__all__ = ["PEOPLE_COMMANDS", "People", "not_waiting"]

PEOPLE_COMMANDS = frozenset({"resume", "reject", "override", "approve-before"})


def not_waiting(task_id: str) -> str:
    """A person's approve or reject of a task no running mission has (a finished one's, an unknown one)."""
    return f"task {task_id} is not waiting for approval: no running mission has it (`polpo show {task_id}` says its state)"


class People:
    def __init__(self, store: Store, clock: Clock, board: MissionBoard) -> None:
        self.store = store
        self.clock = clock
        self.board = board
        board.ask_approval = self.ask

    async def apply(self, kind: str, target: str, args: dict[str, Any]) -> str:
        by = str(args.get("by") or "user")
        if kind == "resume":
            return self.board.holds.resume(target, args.get("checkpoint"), by, args.get("note"))
        if kind == "approve-before":
            return self.approve(target, by, args.get("note"))
        if kind == "reject":
            return self.reject(target, by, str(args.get("reason") or "rejected"))
        if kind == "override":
            return await override_verdict(self.store, self.clock, target, passed=bool(args.get("passed")),
                                          reason=str(args.get("reason") or ""), by=by, score=args.get("score"))
        raise Refused(f"unknown command {kind!r}")

    # -- approval before the first attempt -----------------------------------------------------------------
    def ask(self, task: Task) -> bool:
        """True when ``task`` must wait for a person before it starts (it is then awaiting approval)."""
        wanted = task.doc.approval(task.idx)
        m = self.board.missions.get(task.mission_id)
        if wanted is None or m is None:
            return False
        key = (HoldKind.APPROVAL, task.id)
        state = m.holds.get(key)
        if state is not None and state.status is HoldStatus.RELEASED:
            return False  # granted once: the task's later attempts (fixes, retries) need no new approval
        timeout, action = wanted
        now = self.clock.now()
        if state is None or state.status is HoldStatus.REFUSED:  # a retry of a rejected task asks again
            state = HoldState(HoldKind.APPROVAL, task.id, HoldStatus.REACHED, now,
                              expires_at=None if timeout is None else now + timeout)
            m.holds[key] = state
        tx = self.store.tx().decided().hold(m.id, state)
        tx.event(ApprovalRequested(title=task.title, approve=f"polpo approve {task.id}",
                                   reject=f"polpo reject {task.id} --reason TEXT",
                                   timeout_at=None if state.expires_at is None else iso(state.expires_at),
                                   timeout_action=None if timeout is None else action),
                 mission_id=m.id, task_id=task.id)
        self.board.transition(tx, task, Trigger.ASK_APPROVAL, "waiting for a person's approval before it starts")
        self.store.submit(tx)
        return True

    def waits_before(self, task_id: str) -> bool:
        """Is ``task_id`` awaiting an approval "before" (not a sideEffects re-run's)?"""
        task = self.board.tasks.get(task_id)
        if task is None or task.status is not TaskStatus.AWAITING_APPROVAL:
            return False
        state = self.board.mission_of(task).holds.get((HoldKind.APPROVAL, task_id))
        return state is not None and state.status is HoldStatus.REACHED

    def _waiting(self, task_id: str) -> tuple[Task, HoldState]:
        task = self.board.tasks.get(task_id)
        if task is None:
            raise Refused(not_waiting(task_id))
        state = self.board.mission_of(task).holds.get((HoldKind.APPROVAL, task_id))
        if task.status is not TaskStatus.AWAITING_APPROVAL or state is None or state.status is not HoldStatus.REACHED:
            raise Refused(f"task {task_id} is {task.status}, not awaiting approval")
        return task, state

    def approve(self, task_id: str, by: str, note: str | None = None) -> str:
        task, state = self._waiting(task_id)
        self._grant(task, state, by, note)
        return f"approved {task_id}: its first attempt runs next"

    def _grant(self, task: Task, state: HoldState, by: str, note: str | None) -> None:
        state.status, state.released_at, state.by, state.note = HoldStatus.RELEASED, self.clock.now(), by, note
        tx = self.store.tx().decided().hold(task.mission_id, state)
        tx.event(ApprovalResolved(status="approved", by=by, reason=note), mission_id=task.mission_id, task_id=task.id)
        tx.event(TaskApproved(next=task.next_kind), mission_id=task.mission_id, task_id=task.id)
        self.board.transition(tx, task, Trigger.APPROVE, f"approved by {by}")
        self.store.submit(tx)
        self.board.make_ready(task)

    def reject(self, task_id: str, by: str, reason: str) -> str:
        task, state = self._waiting(task_id)
        self._refuse(task, state, by, reason, "rejected")
        return f"rejected {task_id}: {reason}"

    def _refuse(self, task: Task, state: HoldState, by: str, reason: str, status: str) -> None:
        state.status, state.released_at, state.by, state.note = HoldStatus.REFUSED, self.clock.now(), by, reason
        tx = self.store.tx().decided().hold(task.mission_id, state)
        tx.event(ApprovalResolved(status=status, by=by, reason=reason), mission_id=task.mission_id, task_id=task.id)
        self.board.transition(tx, task, Trigger.REJECT, f"{status} by {by}: {reason}")
        self.store.submit(tx)
        self.board.after_change(task)

    def tick(self, now: datetime) -> int:
        """Approvals whose ``approvalTimeout`` passed: the task's ``approvalTimeoutAction`` applies."""
        due: list[tuple[Task, HoldState]] = []
        for m in list(self.board.missions.values()):
            if m.status is not MissionStatus.RUNNING:
                continue
            for (kind, task_id), s in m.holds.items():
                if kind is HoldKind.APPROVAL and s.status is HoldStatus.REACHED and s.expires_at is not None \
                        and s.expires_at <= now and (t := m.tasks.get(task_id)) is not None \
                        and t.status is TaskStatus.AWAITING_APPROVAL:
                    due.append((t, s))
        for task, state in due:
            wanted = task.doc.approval(task.idx)
            if wanted is not None and wanted[1] == "approve":
                self._grant(task, state, "timeout", "approved when the approval timed out (approvalTimeoutAction)")
            else:
                self._refuse(task, state, "timeout", "nobody approved it before its approvalTimeout", "timeout")
        return len(due)
