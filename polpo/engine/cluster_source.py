"""The cluster's claim queue as the dispatcher's task source (several daemons on one store).

The leader offers a task when it becomes ready (a row in the same transaction as the state that made it ready);
every node claims offers within the cluster-wide limits (:class:`ClaimQueue`: PostgreSQL, or
:class:`polpo.store.memory_claims.MemoryClaims` with the same rules) and holds the claim for the task's
whole turn, which makes it the only writer of the task's row. A claim carries the task's row and latest attempt
as stored when it was claimed: the turn before may have run on another node.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from polpo.agents.registry import AgentSlot
from polpo.engine.board import MissionBoard, refresh
from polpo.engine.handles import RunHandle
from polpo.engine.sources import Turn
from polpo.events.catalog import WorkspaceUnreachable
from polpo.model.records import Attempt, Mission, Task
from polpo.model.status import AttemptStatus, MissionStatus, TaskStatus
from polpo.store import rows as R
from polpo.store.claim_records import DeadClaim
from polpo.store.claim_writes import end, offer, offer_row
from polpo.store.postgres_faults import is_outage
from polpo.store.protocol import Store

__all__ = ["CLAIM_SWEEP", "ClaimQueueLike", "ClusterSource"]

log = logging.getLogger("polpo.cluster")

CLAIM_SWEEP = 5.0  # seconds: a look at the cluster's queue even without a notification (one lost on reconnect)


class ClaimedLike(Protocol):
    @property
    def task_id(self) -> str: ...

    @property
    def mission_id(self) -> str: ...

    def task(self, m: Mission) -> Task | None: ...

    def attempt(self) -> Attempt | None: ...


class ClaimQueueLike(Protocol):
    """The cluster's queue of ready tasks, as the engine uses it (PostgreSQL's or the in-memory one)."""

    node: str
    lease: float  # seconds: a node whose heartbeat is older is dead
    skip: set[str]  # missions whose tasks this node does not claim

    async def claim(self, n: int) -> Sequence[Any]: ...

    def end_row(self, task_id: str) -> R.Row: ...

    async def end(self, task_id: str, *, requeue: bool) -> None: ...

    async def hold(self, row: R.Row) -> bool: ...

    async def seize(self, task_ids: Sequence[str]) -> dict[str, str]: ...

    async def dead(self) -> list[DeadClaim]: ...

    async def take_over(self, dead: DeadClaim) -> bool: ...

    async def held(self) -> set[str]: ...

    async def fresh_tasks(self, m: Mission, task_ids: Sequence[str]) -> dict[str, tuple[Task, Attempt | None]]: ...

    async def mission_gates(self, mission_id: str) -> dict[str, str]: ...

    async def relay(self, kind: str, target: str) -> tuple[str, str]: ...


class ClusterSource:
    sweep: float | None = CLAIM_SWEEP

    def __init__(self, *, store: Store, board: MissionBoard, queue: ClaimQueueLike,
                 slot_of: Callable[[Task], AgentSlot], unreachable: Callable[[Path, str], str | None]) -> None:
        self.unreachable = unreachable  # why this node (named) cannot use a workspace (None: it can)
        self.store = store
        self.board = board
        self.queue = queue
        self.slot_of = slot_of
        self.own: set[str] = set()  # claims this node knows it holds: its turns, the leader's recoveries
        self._in_doubt = False  # a claim failed on an outage: it may have committed, its answer lost

    def offer(self, task: Task) -> None:
        """A task the leader made ready (or found in review) goes to the queue, in the next transaction."""
        m = self.board.missions.get(task.mission_id)
        if m is None or m.status is not MissionStatus.RUNNING:
            return
        slot = self.slot_of(task)
        self.store.submit(offer(self.store.tx().decided(), offer_row(task, m, slot.limit_key, slot.max_concurrency)))

    def resume(self, task: Task) -> None:
        self.offer(task)  # the node that claims it finds it in review and resumes its checks

    async def claim(self, n: int) -> list[Turn]:
        if self._in_doubt:
            await self._give_back_lost()
        try:
            claims = await self.queue.claim(n)
        except Exception as e:
            self._in_doubt = self._in_doubt or is_outage(e)
            raise
        self.own.update(c.task_id for c in claims)
        return [Turn(c.task_id, RunHandle(c.task_id, []), c) for c in claims]

    async def _give_back_lost(self) -> None:
        """A claim whose COMMIT was answered by a dropped connection may have been written: this live node then
        holds it with no turn, and its task would never run (nobody takes a live node's claims over). Every claim
        of this node that it does not know of goes back to the queue."""
        known = set(self.own)
        await self.store.flush()  # the ends of the turns finished before now are written (no longer held)
        lost = await self.queue.held() - known - self.own
        for task_id in sorted(lost):
            await self.queue.end(task_id, requeue=True)
        if lost:
            log.warning("gave back %d claim(s) taken by a transaction whose answer was lost: %s", len(lost),
                        ", ".join(sorted(lost)))
        self._in_doubt = False

    async def prepare(self, turn: Turn) -> Task | None:
        """The claimed task with its state as stored at the claim; None, and the claim dropped, when it is no
        longer startable (cancelled or decided meanwhile)."""
        claim: ClaimedLike = turn.claim
        task_id = claim.task_id
        m = self.board.missions.get(claim.mission_id)
        leads = m is not None
        if m is None:
            m = self.board.visiting.get(claim.mission_id) or await self._visit(claim.mission_id)
        task = m.tasks.get(task_id) if m is not None else None
        stored = claim.task(m) if m is not None else None
        if m is None or task is None or stored is None:
            await self.queue.end(task_id, requeue=False)
            self.own.discard(task_id)
            return None
        if m.home is None and (why := self.unreachable(m.workspace, self.queue.node)) is not None:
            await self._refuse(m, task_id, why)
            return None
        refresh(task, stored)
        attempt = claim.attempt()
        if attempt is not None:
            self.board.attempts[task_id] = attempt
        startable = task.status is TaskStatus.PENDING or (
            task.status is TaskStatus.REVIEW and attempt is not None and attempt.status is AttemptStatus.FINISHED)
        if not startable or (leads and m.status is not MissionStatus.RUNNING):
            await self.queue.end(task_id, requeue=False)
            self.own.discard(task_id)
            return None
        return task

    async def _refuse(self, m: Mission, task_id: str, why: str) -> None:
        """A task of an "affinity": "any" mission whose workspace this node cannot reach goes back to the queue for
        a node that can, and this node claims none of the mission's tasks again (it never runs one elsewhere)."""
        self.queue.skip.add(m.id)
        log.warning("node %s gives back %s: %s", self.queue.node, task_id, why)
        self.store.submit(self.store.tx().event(WorkspaceUnreachable(
            node=self.queue.node, workspace=str(m.workspace), reason=why), mission_id=m.id, task_id=task_id))
        await self.queue.end(task_id, requeue=True)
        self.own.discard(task_id)

    async def _visit(self, mission_id: str) -> Mission | None:
        """The mission of a claimed task another node leads: read once, kept while it is open (the leader's
        ``mission:completed`` drops it, :meth:`polpo.engine.cluster_role.ClusterRole.on_remote`)."""
        loaded = await self.store.load_mission(mission_id)
        if loaded is None or not loaded.mission.status.open:
            return None
        if mission_id in self.board.missions:  # this node was elected while it read the mission
            return self.board.missions[mission_id]
        return self.board.visit(loaded)

    def finish(self, task: Task, turn: Turn) -> None:
        """The claim goes back to the queue or away, in a transaction queued after the turn's last state (the
        writer keeps the order), so it never ends before that state is durable."""
        m = self.board.missions.get(task.mission_id)
        requeue = task.status in (TaskStatus.PENDING, TaskStatus.REVIEW) and (
            m is None or m.status is MissionStatus.RUNNING)
        if m is None and task.terminal:
            self.board.attempts.pop(task.id, None)  # the leader decides what the end means; nothing kept here
        self.store.submit(end(self.store.tx(), self.queue.end_row(task.id), requeue=requeue))
        self.own.discard(task.id)

    async def seize(self, task_ids: Sequence[str]) -> dict[str, str]:
        await self.store.flush()  # offers still queued are in the database before they are withdrawn
        return await self.queue.seize(task_ids)

    def __len__(self) -> int:
        return 0
