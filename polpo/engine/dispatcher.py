"""The dispatcher: starts every startable task each time something changes, within the concurrency limits.

Event-driven: a task that becomes ready, a freed slot or a command wakes the loop at once; there is no polling
interval on a task's path. Each run is guarded: an unexpected exception in one task's runner fails that task
with an ``internal error`` reason and an event, and every other task and mission goes on — one bug in one
task never ends the daemon.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup

from polpo.agents.registry import AgentFactory, AgentSlot
from polpo.engine.board import MissionBoard
from polpo.engine.handles import RunHandle
from polpo.engine.ready import ReadyQueue
from polpo.model.records import Mission, Task
from polpo.model.status import MissionStatus, StopReason, TaskStatus
from polpo.store.identity import StoreLost
from polpo.tools.proctable import kill_group

log = logging.getLogger("polpo.dispatcher")

__all__ = ["Dispatcher"]

RunTask = Callable[[Task, RunHandle], Awaitable[None]]
CLAIM_SWEEP = 5.0  # seconds: a look at the cluster's queue even without a notification (one lost on reconnect)


class Claimed(Protocol):
    @property
    def task_id(self) -> str: ...


class ClaimSource(Protocol):
    """Several daemons: ready tasks come from the cluster's queue (polpo.engine.cluster_role), not this node's."""

    def offer(self, task: Task) -> None: ...

    async def claim(self, n: int) -> Sequence[Claimed]: ...

    async def prepare(self, claim: Any, handle: RunHandle) -> Task | None: ...

    async def finish(self, task: Task) -> None: ...


class Dispatcher:
    def __init__(self, board: MissionBoard, agents: AgentFactory, max_concurrency: int, run_task: RunTask,
                 on_release: Callable[[], object] | None = None) -> None:
        self.board = board
        self.on_release = on_release  # after a task's turn ends (the engine sweeps what it left running)
        self.agents = agents
        self.run_task = run_task
        self.queue = ReadyQueue(max_concurrency)
        self.max_concurrency = max_concurrency
        self.claims: ClaimSource | None = None
        self.running: dict[str, RunHandle] = {}
        self.resuming: set[str] = set()  # tasks in review whose checks resume after a restart
        self.stopping = False
        self._wake = anyio.Event()
        self._all_released = anyio.Event()
        self._slots: dict[tuple[str, str], AgentSlot] = {}

    def wake(self) -> None:
        self._wake.set()

    # -- readiness ------------------------------------------------------------------------------------------
    def make_ready(self, task: Task) -> None:
        if self.claims is not None:
            self.claims.offer(task)
            return
        m = self.board.missions.get(task.mission_id)
        if m is not None:
            self.queue.push(task.priority, m.seq, task.idx, task.id)
            self.wake()

    def resume(self, task: Task) -> None:
        """After a restart: a task in review runs its remaining checks (the agent does not run again)."""
        if self.claims is not None:  # the node that claims it finds it in review and resumes its checks
            self.claims.offer(task)
            return
        self.resuming.add(task.id)
        self.make_ready(task)

    def slot(self, task: Task) -> AgentSlot:
        key = (task.mission_id, task.agent)
        s = self._slots.get(key)
        if s is None:
            m = self.board.missions[task.mission_id]
            s = self._slots[key] = self.agents.resolve(m.id, m.spec, task.agent)
        return s

    def forget(self, m: Mission) -> None:
        """A finished mission: drop its resolved agents and wake the loop (its slots may free others)."""
        for key in [k for k in self._slots if k[0] == m.id]:
            del self._slots[key]
        self.wake()

    def _is_ready(self, task_id: str) -> bool:
        t = self.board.tasks.get(task_id)
        if t is None or task_id in self.running:
            return False
        if self.board.missions[t.mission_id].status is not MissionStatus.RUNNING:
            return False
        if task_id in self.resuming:
            return t.status is TaskStatus.REVIEW
        return t.status is TaskStatus.PENDING and t.waiting_on == 0

    def _limits_of(self, task_id: str) -> list[tuple[str, int | None]]:
        t = self.board.tasks[task_id]
        s = self.slot(t)
        m = self.board.missions[t.mission_id]
        return [(f"agent:{s.limit_key}", s.max_concurrency), (f"mission:{m.id}", m.spec.settings.max_concurrency)]

    # -- the loop -------------------------------------------------------------------------------------------
    async def run(self, tg: TaskGroup) -> None:
        if self.claims is not None:
            await self._run_claimed(tg, self.claims)
            return
        while not self.stopping:
            self._wake = anyio.Event()
            while not self.stopping:
                task_id = self.queue.pop_startable(self._is_ready, self._limits_of)
                if task_id is None:
                    break
                self.resuming.discard(task_id)
                task = self.board.tasks[task_id]
                handle = RunHandle(task_id, [k for k, _ in self._limits_of(task_id)])
                self.running[task_id] = handle
                self.queue.started(handle.keys)
                tg.start_soon(self._guarded, task, handle, name=f"task {task_id}")
                del task, handle  # its run holds them; this frame must not keep a finished mission alive
            await self._wake.wait()

    async def _run_claimed(self, tg: TaskGroup, claims: ClaimSource) -> None:
        """Claim from the cluster's queue while this node has free slots; wake on an offer, a freed slot, or the
        slow safety sweep (an offer's notification lost while the listening connection was down)."""
        while not self.stopping:
            self._wake = anyio.Event()
            free = self.max_concurrency - len(self.running)
            got: Sequence[Claimed] = []
            if free > 0:
                try:
                    got = await claims.claim(free)
                except Exception:
                    log.exception("could not claim tasks from the cluster's queue; trying again")
            for claim in got:
                task_id = claim.task_id
                handle = RunHandle(task_id, [])
                self.running[task_id] = handle  # before any wait: a stop asked meanwhile reaches the handle
                try:
                    task = await claims.prepare(claim, handle)
                except Exception:
                    log.exception("could not prepare claimed task %s", task_id)
                    task = None
                if task is None:
                    self.running.pop(task_id, None)
                    continue
                if self._stopped():  # the daemon began to stop while the task was read: give it back
                    self.running.pop(task_id, None)
                    tg.start_soon(claims.finish, task)
                    continue
                tg.start_soon(self._guarded, task, handle, name=f"task {task_id}")
            if got and len(got) == free:
                continue
            with anyio.move_on_after(CLAIM_SWEEP):
                await self._wake.wait()

    def _stopped(self) -> bool:
        return self.stopping

    async def _guarded(self, task: Task, handle: RunHandle) -> None:
        try:
            await self.run_task(task, handle)
        except StoreLost:  # the database is gone: nothing about the task can be recorded, and the daemon stops
            pass
        except Exception as exc:
            log.error("internal error while running task %s:\n%s", task.id, traceback.format_exc())
            self._contain(task, handle, exc)
        finally:
            if self.claims is not None:
                with anyio.CancelScope(shield=True):
                    await self._finish_claim(self.claims, task)
            self.release(handle)

    @staticmethod
    async def _finish_claim(claims: ClaimSource, task: Task) -> None:
        try:
            await claims.finish(task)
        except Exception:  # the leader finds the claim when this node's lease runs out
            log.exception("could not end the claim of task %s", task.id)

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
        if self.claims is None:
            self.queue.finished(handle.keys)
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

    async def stop(self, grace: float) -> None:
        """Stop dispatching; give running agents ``grace`` seconds, then stop what is left."""
        self.stopping = True
        self.wake()
        if not self.running:
            return
        self._all_released = anyio.Event()
        with anyio.move_on_after(grace):
            await self._all_released.wait()
        for handle in list(self.running.values()):
            handle.stop(StopReason.SHUTDOWN)
        if self.running:
            await self._all_released.wait()
