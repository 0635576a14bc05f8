"""The dispatcher: starts every startable task each time something changes, within the concurrency limits.

One loop for one node or many: turns come from a task source (:mod:`polpo.engine.sources`: this node's ready
queue, or the cluster's claim queue), are run under a guard, and are given back to it when they end.
Event-driven: a task that becomes ready, a freed slot or a command wakes the loop at once; there is no polling
interval on a task's path. Each run is guarded: an unexpected exception in one task's runner fails that task
with an ``internal error`` reason and an event, and every other task and mission goes on — one bug in one
task never ends the daemon.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

import anyio
from anyio.abc import TaskGroup

from polpo.agents.registry import AgentFactory, AgentSlot
from polpo.engine.board import MissionBoard
from polpo.engine.handles import RunHandle
from polpo.engine.sources import TaskSource, Turn
from polpo.model.records import Mission, Task
from polpo.model.status import StopReason, TaskStatus
from polpo.oplog import bind_task
from polpo.store.identity import StoreLost
from polpo.store.outage_wait import OUTAGE_FIRST, OutageWait
from polpo.tools.proctable import kill_group

log = logging.getLogger("polpo.dispatcher")

__all__ = ["Dispatcher", "after_error"]

RunTask = Callable[[Task, RunHandle], Awaitable[None]]
TurnEnd = Literal["again", "leave", "contain"]


def after_error(outage: bool, ending: bool, status: TaskStatus) -> TurnEnd:
    """What a task's turn that raised does next (pure).

    * ``again``: the store's outage (a PostgreSQL reset…) where the turn can be taken again from what is stored:
      before anything started (pending), or with the agent's result stored (review: its assessment resumes, the
      agent never runs twice). Not the task's fault, so it is not failed for it (nemesis seed 18).
    * ``leave``: an outage met while this node stops, or may no longer write (fenced: its lease ran out while the
      database was away): the turn ends and the task stays as stored, for the next start or the next leader
      (nemesis seed 8014: a read reset by a PostgreSQL kill, as the node left, was failed as an internal error).
    * ``contain``: anything else is the runner's bug: the task fails with an internal error, the daemon goes on.
    """
    if outage and ending:
        return "leave"
    if outage and status in (TaskStatus.PENDING, TaskStatus.REVIEW):
        return "again"
    return "contain"


class Dispatcher:
    def __init__(self, board: MissionBoard, agents: AgentFactory, max_concurrency: int, run_task: RunTask,
                 source: TaskSource, on_release: Callable[[], object] | None = None,
                 away: Callable[[BaseException], bool] = lambda _e: False,
                 ended: Callable[[], bool] = lambda: False) -> None:
        self.board = board
        self.away = away  # whether an error is the store's outage (Store.away): the task's turn waits it out
        self.ended = ended  # whether this node may no longer write (fenced, or its database lost)
        self.on_release = on_release  # after a task's turn ends (the engine sweeps what it left running)
        self.agents = agents
        self.run_task = run_task
        self.source = source  # this node's queue, or the cluster's (polpo.engine.sources)
        self.max_concurrency = max_concurrency
        self.running: dict[str, RunHandle] = {}
        self.stopping = False
        self._wake = anyio.Event()
        self._all_released = anyio.Event()
        self._grace: anyio.CancelScope | None = None  # the shutdown grace's wait, while it runs
        self._grace_cut = False  # a second stop signal came: no grace (or none left)
        self._slots: dict[tuple[str, str], AgentSlot] = {}
        self._claims = OutageWait("claiming tasks", log)  # a database outage: claims wait, with backoff

    def wake(self) -> None:
        self._wake.set()

    # -- readiness ------------------------------------------------------------------------------------------
    def make_ready(self, task: Task) -> None:
        self.source.offer(task)

    def resume(self, task: Task) -> None:
        """A task in review runs its remaining checks (the agent does not run again): after a restart, a retry."""
        self.source.resume(task)

    def slot(self, task: Task) -> AgentSlot:
        key = (task.mission_id, task.agent)
        s = self._slots.get(key)
        if s is None:
            m = self.board.mission_of(task)
            s = self._slots[key] = self.agents.resolve(m.id, m.spec, task.agent)
        return s

    def forget(self, m: Mission) -> None:
        """A finished mission: drop its resolved agents and wake the loop (its slots may free others)."""
        for key in [k for k in self._slots if k[0] == m.id]:
            del self._slots[key]
        self.wake()

    # -- the loop -------------------------------------------------------------------------------------------
    async def run(self, tg: TaskGroup) -> None:
        """Claim turns while this node has free slots; wake on an offer, a freed slot, a command, or (a cluster's
        queue) the slow safety sweep that covers an offer whose notification was lost."""
        source = self.source
        while not self.stopping:
            self._wake = anyio.Event()
            free = self.max_concurrency - len(self.running)
            turns: Sequence[Turn] = ()
            if free > 0:
                try:
                    turns = await source.claim(free)
                    self._claims.ok()
                except StoreLost:  # fenced, or the database is gone: the daemon stops (it said why); no more claims
                    return
                except Exception as e:
                    delay = self._claims.failed(e)
                    if delay is None:
                        log.exception("could not claim tasks; trying again")
                    else:
                        await anyio.sleep(delay)
                        continue
            for turn in turns:
                task_id = turn.task_id
                self.running[task_id] = turn.handle  # before any wait: a stop asked meanwhile reaches the handle
                task = await self._prepare(source, turn)
                if task is None:  # no longer startable: the source ended the turn
                    self.running.pop(task_id, None)
                    continue
                if self._stopped():  # the daemon began to stop while the task was read: give it back
                    self.running.pop(task_id, None)
                    self._finish(source, task, turn)
                    continue
                tg.start_soon(self._guarded, task, turn, name=f"task {task_id}")
                del task, turn  # its run holds them; this frame must not keep a finished mission alive
            if turns and len(turns) == free:
                continue
            if source.sweep is None:
                await self._wake.wait()
            else:
                with anyio.move_on_after(source.sweep):
                    await self._wake.wait()

    async def _prepare(self, source: TaskSource, turn: Turn) -> Task | None:
        """The claimed turn's task; through a database outage the claim stays this node's and the read is tried
        again (a claim given up here would stay held by a live node, and its task would never run)."""
        while True:
            try:
                task = await source.prepare(turn)
                self._claims.ok()
                return task
            except Exception as e:
                delay = self._claims.failed(e)
                if delay is None or self.stopping:
                    if delay is None:
                        log.exception("could not prepare claimed task %s", turn.task_id)
                    return None
                await anyio.sleep(delay)

    def _stopped(self) -> bool:
        return self.stopping

    async def _guarded(self, task: Task, turn: Turn) -> None:
        handle = turn.handle
        bind_task(task.mission_id, task.id)  # this run's log records name its task
        wait = OutageWait(f"task {task.id}", log, away=self.away)  # (SQLite's StoreUnavailable backs off too)
        try:
            while True:
                try:
                    await self.run_task(task, handle)
                    return
                except StoreLost:  # the database is gone: nothing about the task can be recorded; the daemon stops
                    return
                except Exception as exc:
                    ending = self.stopping or handle.stop_reason is not None or self.ended()
                    then = after_error(self.away(exc), ending, task.status)
                    if then == "leave":
                        log.warning("task %s: its turn ends with this node's stop (the store is away: %s); it goes "
                                    "on from what is stored", task.id, exc)
                        return
                    if then == "contain":
                        log.error("internal error while running task %s:\n%s", task.id, traceback.format_exc())
                        self._contain(task, handle, exc)
                        return
                    await anyio.sleep(wait.failed(exc) or OUTAGE_FIRST)  # (at most OUTAGE_CAP: a stop waits that)
        finally:
            self._finish(self.source, task, turn)
            self.release(handle)

    @staticmethod
    def _finish(source: TaskSource, task: Task, turn: Turn) -> None:
        try:
            source.finish(task, turn)
        except Exception:  # a cluster's claim: the leader finds it when this node's lease runs out
            log.exception("could not end the turn of task %s", task.id)

    def _contain(self, task: Task, handle: RunHandle, exc: Exception) -> None:
        """Fail the task whose runner raised; the daemon, and every other task, go on."""
        try:
            attempt = handle.attempt
            if attempt is not None and attempt.pid is not None and attempt.status.live:
                kill_group(attempt.pid)  # nothing of the failed run may outlive it
            self.board.fail_internal(task, f"{type(exc).__name__}: {exc}", "task runner")
        except Exception:  # the containment itself failed: log it, never let it end the daemon
            log.exception("could not record the internal error of task %s", task.id)

    def release(self, handle: RunHandle) -> None:
        self.running.pop(handle.task_id, None)
        if self.on_release is not None:
            try:
                self.on_release()
            except Exception:
                log.exception("the sweep after task %s failed", handle.task_id)
        if not self.running:
            self._all_released.set()
        self.wake()

    def stop_task(self, task_id: str, reason: StopReason) -> bool:
        """Stop a running task's run (cancel, SLA, shutdown); False when it is not running."""
        handle = self.running.get(task_id)
        if handle is None:
            return False
        handle.stop(reason)
        return True

    def cut_grace(self) -> list[str]:
        """A second stop signal: the shutdown grace ends now. Returns the tasks whose agents are being stopped."""
        self._grace_cut = True
        if self._grace is not None:
            self._grace.cancel()
        return sorted(self.running)

    async def stop(self, grace: float) -> None:
        """Stop dispatching; give running agents ``grace`` seconds, then stop what is left."""
        self.stopping = True
        self.wake()
        if not self.running:
            return
        self._all_released = anyio.Event()
        with anyio.move_on_after(0 if self._grace_cut else grace) as self._grace:
            await self._all_released.wait()
        for handle in list(self.running.values()):
            handle.stop(StopReason.SHUTDOWN)
        if self.running:
            await self._all_released.wait()
