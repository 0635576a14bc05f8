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
        """Sources, run counters and every unfinished mission, into the board."""
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
        m = self.board.adopt(loaded)
        self.admission.adopt(m)
        return m

    async def recover(self) -> None:
        """Reconcile loaded missions with reality: orphans killed, interrupted runs re-queued, checks resumed."""
        for hook in self.hooks:
            await hook(dict(self.board.missions))
        tx = self.store.tx()
        orphans: list[int] = []
        resume: list[Task] = []
        for m in list(self.board.missions.values()):
            for task in m.tasks.values():
                attempt = self.board.attempts.get(task.id)
                if task.status in (TaskStatus.ASSIGNED, TaskStatus.IN_PROGRESS):
                    self.interrupted(tx, m, task, attempt, orphans)
                elif task.status is TaskStatus.REVIEW and attempt is not None \
                        and attempt.status is AttemptStatus.FINISHED:
                    # its checks carry the attempt's marker: a check the crash left running is ended first
                    orphans.extend(_orphan_groups(attempt, attempt_mark(self.cfg.state_dir, attempt.id)))
                    tx.event(TaskRecovered(previous_status=task.status, attempt=attempt.number,
                                           action="resume checks"), mission_id=m.id, task_id=task.id)
                    resume.append(task)
        await _kill(orphans)
        await self.store.commit(tx)
        for m in list(self.board.missions.values()):
            if m.status is MissionStatus.CANCELLING:
                m.status = MissionStatus.RUNNING
                self.commands.cancel_mission(m.id, by="recovery")
                continue
            if m.open_tasks <= 0:
                self.board.complete_mission(m)
                continue
            for task in m.tasks.values():
                self.board.make_ready(task)
        for task in resume:
            if task.mission_id in self.board.missions:
                self.dispatcher.resume(task)
        self.dispatcher.wake()

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
