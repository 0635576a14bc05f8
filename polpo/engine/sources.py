"""Where the dispatcher's tasks come from: one protocol, whatever the number of nodes.

A single daemon is a one-node cluster. The dispatcher has one loop: it asks its :class:`TaskSource` for up to
``n`` turns (``claim``), turns each into a task ready to run (``prepare``), and gives the turn back when it ends
(``finish``). The board hands the source what became ready (``offer``) or must resume its checks (``resume``).

* :class:`LocalSource` — this node's :class:`~polpo.engine.ready.ReadyQueue`: the claim is a pop, limits are
  counted here, nothing is written (the single-node hot path costs what it did before the protocol existed).
* :class:`polpo.engine.cluster_source.ClusterSource` — the cluster's claim queue, on PostgreSQL
  (:class:`polpo.store.cluster.claims.ClaimQueue`) or in memory with the same rules
  (:class:`polpo.store.memory_claims.MemoryClaims`, for unit tests of cluster semantics).

This is procrastinate's split (a worker pulls jobs from a job manager over a connector; an in-memory connector
fakes even the claim), applied to tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from polpo.agents.registry import AgentSlot
from polpo.engine.board import MissionBoard
from polpo.engine.handles import RunHandle
from polpo.engine.ready import ReadyQueue
from polpo.model.records import Task
from polpo.model.status import MissionStatus, TaskStatus

__all__ = ["LocalSource", "TaskSource", "Turn"]


@dataclass(slots=True)
class Turn:
    """A task this node may run now, until ``finish``: its handle, and what the source needs to end it."""

    task_id: str
    handle: RunHandle
    claim: Any = None  # the source's own record of the claim (the stored rows it read with it)


class TaskSource(Protocol):
    sweep: float | None  # seconds the dispatcher may sleep with nothing to wake it (None: until woken)

    def offer(self, task: Task) -> None:
        """A task became ready (pending, nothing to wait for)."""

    def resume(self, task: Task) -> None:
        """A task in review whose agent's result is stored: its checks run (the agent does not run again)."""

    async def claim(self, n: int) -> Sequence[Turn]:
        """Up to ``n`` turns this node may start now (within every concurrency limit it keeps)."""

    async def prepare(self, turn: Turn) -> Task | None:
        """The task of a claimed turn, as stored; None when it is no longer startable (the turn is then over)."""

    def finish(self, task: Task, turn: Turn) -> None:
        """The turn is over (its last state is queued for the writer): its slot, or its claim, goes."""

    async def seize(self, task_ids: Sequence[str]) -> dict[str, str]:
        """Before the leader changes tasks this node does not run: queued offers of them are withdrawn; returns
        those another node holds (task id -> node), which the leader asks to stop instead."""

    def __len__(self) -> int:
        """Tasks waiting in this node's queue (the API's queue depth; 0 when the queue is the cluster's)."""


class LocalSource:
    """The ready queue of one node: priority, then mission order, then file order, within the limits."""

    sweep: float | None = None

    def __init__(self, board: MissionBoard, max_concurrency: int, *, slot_of: Callable[[Task], AgentSlot],
                 wake: Callable[[], None], paused: Callable[[str], str | None] = lambda _agent: None) -> None:
        """``paused(agent)``: the key of a daily budget holding the agent's new work back (polpo.engine.spend_book),
        or None; such a task is parked under that key, with a limit of 0, until :meth:`unpause`."""
        self.board = board
        self.paused = paused
        self.slot_of = slot_of
        self.wake = wake
        self.queue = ReadyQueue(max_concurrency)
        self.held: set[str] = set()  # tasks whose turn was claimed and has not finished
        self.resuming: set[str] = set()  # tasks in review whose checks resume (after a restart, a retry)

    def offer(self, task: Task) -> None:
        m = self.board.missions.get(task.mission_id)
        if m is not None:
            self.queue.push(task.priority, m.seq, task.idx, task.id)
            self.wake()

    def resume(self, task: Task) -> None:
        self.resuming.add(task.id)
        self.offer(task)

    def _is_ready(self, task_id: str) -> bool:
        t = self.board.tasks.get(task_id)
        if t is None or task_id in self.held:
            return False
        if self.board.missions[t.mission_id].status is not MissionStatus.RUNNING:
            return False
        if task_id in self.resuming:
            return t.status is TaskStatus.REVIEW
        return t.status is TaskStatus.PENDING and t.waiting_on == 0

    def _limits_of(self, task_id: str) -> list[tuple[str, int | None]]:
        t = self.board.tasks[task_id]
        s = self.slot_of(t)
        m = self.board.missions[t.mission_id]
        limits = [(f"agent:{s.limit_key}", s.max_concurrency), (f"mission:{m.id}", m.spec.settings.max_concurrency)]
        held = self.paused(t.agent)
        if held is not None:
            limits.append((held, 0))
        return limits

    def unpause(self) -> None:
        """A new budget period: the tasks parked by a daily budget may start."""
        self.queue.unpark(lambda key: key.startswith("budget:"))
        self.wake()

    async def claim(self, n: int) -> list[Turn]:
        out: list[Turn] = []
        while len(out) < n:
            task_id = self.queue.pop_startable(self._is_ready, self._limits_of)
            if task_id is None:
                break
            self.resuming.discard(task_id)
            handle = RunHandle(task_id, [k for k, _ in self._limits_of(task_id)])
            self.held.add(task_id)
            self.queue.started(handle.keys)
            out.append(Turn(task_id, handle))
        return out

    async def prepare(self, turn: Turn) -> Task | None:
        return self.board.tasks[turn.task_id]

    def finish(self, task: Task, turn: Turn) -> None:
        self.held.discard(turn.task_id)
        self.queue.finished(turn.handle.keys)

    async def seize(self, task_ids: Sequence[str]) -> dict[str, str]:
        return {}  # no other node: a queued entry of a changed task is dropped as stale when it is popped

    def __len__(self) -> int:
        return len(self.queue)
