"""Start-up: rebuild the board from the store and clean up after a crash.

An attempt whose agent was running when the daemon died is recorded as ``interrupted``; its orphaned process
group is killed (found by pid — checked against pid reuse — and by an environment marker, which also finds
grandchildren that changed group); the task runs again. That re-run does not consume a retry, because the
agent never produced a result; after 3 interruptions in a row it counts as a failed run, so a task that
crashes the daemon cannot loop forever. An attempt whose result was stored is never run again: its checks
resume from the stored result.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Sequence

import anyio

from polpo.clock import Clock
from polpo.config import Config
from polpo.engine.admission import Admission, created, missing_tasks
from polpo.engine.board import MissionBoard
from polpo.engine.budget import budget
from polpo.engine.commands import Commands
from polpo.engine.dispatcher import Dispatcher
from polpo.engine.lifecycle import Trigger
from polpo.events.catalog import TaskMaxRetries, TaskRecovered, TaskRetry
from polpo.model.records import Attempt, Mission, Task
from polpo.model.status import AttemptKind, AttemptStatus, MissionStatus, TaskStatus
from polpo.store.protocol import Store
from polpo.store.tx import Tx
from polpo.tools.marks import ATTEMPT_MARK, attempt_mark
from polpo.tools.proctable import find_processes_with_env, process_start_ticks, terminate_group

log = logging.getLogger("polpo.recovery")

__all__ = ["MAX_INTERRUPTIONS", "Recovery"]

MAX_INTERRUPTIONS = 3


class Recovery:
    def __init__(self, *, cfg: Config, store: Store, clock: Clock, board: MissionBoard, admission: Admission,
                 dispatcher: Dispatcher, commands: Commands,
                 hooks: Sequence[Callable[[dict[str, Mission]], Awaitable[None]]] = ()) -> None:
        self.cfg = cfg
        self.hooks = hooks  # run first by recover() with the loaded missions (per-task worktrees reconcile)
        self.store = store
        self.clock = clock
        self.board = board
        self.admission = admission
        self.dispatcher = dispatcher
        self.commands = commands

    async def load_state(self) -> None:
        """Where numbering goes on, and every unfinished mission, into the board (nothing of the finished ones)."""
        await self.admission.load()
        for mid in await self.store.open_mission_ids():
            await self.load_mission(mid)

    async def load_mission(self, mid: str) -> Mission | None:
        """A mission read back from the store into the board (also a finished one, for a retry)."""
        if mid in self.board.missions:
            return self.board.missions[mid]
        loaded = await self.store.load_mission(mid)
        if loaded is None:
            return None
        missing = missing_tasks(loaded.mission, self.admission.agents.default_agent(loaded.mission.spec))
        if missing:  # the daemon stopped while it wrote the mission's tasks: write the rest now
            await self.store.commit(created(self.store.tx(), missing))
        return self.board.adopt(loaded)

    async def recover(self) -> None:
        """After a crash on this machine every task recorded as running lost its holder: each is recovered
        (:meth:`recover_task`), their orphaned processes killed, then every mission settled (:meth:`settle`).
        A cluster's leader takes the same two steps for a dead node's tasks and at election."""
        for hook in self.hooks:
            await hook(dict(self.board.missions))
        tx = self.store.tx()
        orphans: list[int] = []
        for m in list(self.board.missions.values()):
            for task in m.tasks.values():
                self.recover_task(tx, m, task, self.board.attempts.get(task.id), orphans)
        await _kill(orphans)
        await self.store.commit(tx)
        for m in list(self.board.missions.values()):
            await self.settle(m)
        self.dispatcher.wake()

    def recover_task(self, tx: Tx, m: Mission, task: Task, attempt: Attempt | None, orphans: list[int], *,
                     why: str = "the daemon stopped while the agent ran") -> None:
        """A task whose holder is gone (this daemon crashed, or the node that claimed it died): a running
        attempt is recorded as interrupted and the task runs again; an attempt whose result is stored keeps
        it, and its checks resume (:meth:`settle` offers it). Anything else is left as stored."""
        if task.status in (TaskStatus.ASSIGNED, TaskStatus.IN_PROGRESS):
            self.interrupted(tx, m, task, attempt, orphans, why=why)
        elif task.status is TaskStatus.REVIEW and attempt is not None and attempt.status is AttemptStatus.FINISHED:
            # its checks carry the attempt's marker: a check the crash left running is ended first
            orphans.extend(_orphan_groups(attempt, attempt_mark(self.cfg.state_dir, attempt.id)))
            tx.event(TaskRecovered(previous_status=task.status, attempt=attempt.number, action="resume checks"),
                     mission_id=m.id, task_id=task.id)

    async def settle(self, m: Mission) -> None:
        """Decide what a daemon that stopped left undecided in ``m`` (its cascade, gate or completion was not
        written yet), then offer what may run: pending tasks, and tasks in review whose checks resume."""
        if m.id not in self.board.missions:
            return
        for t in list(m.tasks.values()):
            if t.status is TaskStatus.PENDING and any(
                    m.tasks[d].terminal and m.tasks[d].status is not TaskStatus.DONE for d in t.deps):
                tx = self.store.tx()
                self.board.transition(tx, t, Trigger.DEPENDENCY_FAILED, "dependency failed")
                self.store.submit(tx)
                self.board.after_change(t)
        if m.id not in self.board.missions:
            return
        self.board.settle_gates(m)
        if m.id not in self.board.missions:
            return
        if m.status is MissionStatus.CANCELLING:
            m.status = MissionStatus.RUNNING
            await self.commands.cancel(m.id, by="recovery")
            return
        if m.open_tasks <= 0:
            self.board.complete_mission(m)
            return
        for task in m.tasks.values():
            attempt = self.board.attempts.get(task.id)
            if task.status is TaskStatus.REVIEW and task.id not in self.dispatcher.running \
                    and attempt is not None and attempt.status is AttemptStatus.FINISHED:
                self.dispatcher.resume(task)
            else:
                self.board.make_ready(task)

    def interrupted(self, tx: Tx, m: Mission, task: Task, attempt: Attempt | None, orphans: list[int], *,
                    why: str = "the daemon stopped while the agent ran") -> None:
        """An attempt that was running when its daemon died: recorded as interrupted, the task runs again (no
        retry consumed; the third interruption in a row counts as a failed run). ``orphans`` collects the
        process groups to kill (on this machine only; another node's are killed when it starts again)."""
        if attempt is not None and attempt.status.live:
            orphans.extend(_orphan_groups(attempt, attempt_mark(self.cfg.state_dir, attempt.id)))
            attempt.status = AttemptStatus.INTERRUPTED
            attempt.error = f"interrupted: {why}"
            attempt.finished_at = self.clock.now()
            tx.attempt(attempt)
        task.interruptions += 1
        tx.event(TaskRecovered(previous_status=task.status, attempt=attempt.number if attempt else None,
                               action="run again", interruptions=task.interruptions),
                 mission_id=m.id, task_id=task.id)
        self.board.transition(tx, task, Trigger.INTERRUPTED, f"{why}; it runs again")
        if task.interruptions >= MAX_INTERRUPTIONS:
            self._count_as_failure(tx, m, task)

    def _count_as_failure(self, tx: Tx, m: Mission, task: Task) -> None:
        max_retries = budget(task.spec, m.spec, self.cfg.defaults).max_retries
        task.interruptions = 0
        if task.retries < max_retries:
            task.retries += 1
            task.fix_attempts = 0
            task.next_kind = AttemptKind.RETRY
            tx.event(TaskRetry(attempt=task.retries, max_retries=max_retries,
                               reason=f"interrupted {MAX_INTERRUPTIONS} times"), mission_id=m.id, task_id=task.id)
            tx.task(task)
            return
        tx.event(TaskMaxRetries(retries=task.retries, max_retries=max_retries), mission_id=m.id, task_id=task.id)
        for trigger in (Trigger.DISPATCH, Trigger.SPAWNED, Trigger.FINISHED):
            self.board.transition(tx, task, trigger)
        self.board.transition(tx, task, Trigger.EXHAUSTED,
                              f"interrupted {MAX_INTERRUPTIONS} times; retries exhausted")
        self.board.after_change(task)


def _orphan_groups(attempt: Attempt, mark: str) -> list[int]:
    groups: set[int] = set()
    if attempt.pid and attempt.pid_ticks is not None and process_start_ticks(attempt.pid) == attempt.pid_ticks:
        groups.add(attempt.pid)
    for pid in find_processes_with_env(ATTEMPT_MARK, mark):
        try:
            groups.add(os.getpgid(pid))
        except ProcessLookupError:
            continue
    return sorted(groups)


async def _kill(groups: list[int], grace: float = 2.0) -> None:
    """SIGTERM each orphaned group, SIGKILL what is left after ``grace`` seconds (all groups at once)."""
    if not groups:
        return
    async with anyio.create_task_group() as tg:
        for g in groups:
            tg.start_soon(terminate_group, g, grace)
    log.warning("killed %d orphaned process group(s) of a previous daemon", len(groups))
