"""This daemon's part among several on one store: what another node's event or a dead node means for missions.

Roles: every node claims ready tasks from the cluster's queue (:class:`polpo.engine.cluster_source.ClusterSource`,
the dispatcher's task source) and runs each for a whole turn; the one leader also holds every open mission on its
board, accepts mission files and makes every mission-level decision once (dependencies, gates, completion, SLA,
commands) — a single daemon is the leader of a one-node cluster and decides the same way. A node running a task
of a mission it does not lead reads that mission once (``board.visiting``) and decides nothing about it; the
leader follows the task's new state from the events instead (:meth:`ClusterRole.on_remote`). The holder of a claim
is the only writer of its task's row; the leader changes a task another node holds only by asking that node to
stop it (``task:stop-requested``).

A node whose lease ran out: the leader takes its claims over one by one (only one taker wins each) and recovers
each task exactly as start-up recovers a crash on one machine (:meth:`polpo.engine.recovery.Recovery.recover_task`:
the running attempt recorded as interrupted, no retry consumed; checks resumed), then offers it again. Orphaned
processes on the dead machine are killed by that node when it starts again (:func:`kill_state_dir_orphans`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from polpo.engine.board import MissionBoard, refresh, wire
from polpo.engine.lifecycle import Trigger
from polpo.events.catalog import ClusterLeader, ClusterNodeLost, Event
from polpo.model.records import Mission
from polpo.model.status import GateStatus, MissionStatus, StopReason, TaskStatus
from polpo.store.claim_records import DeadClaim
from polpo.store.claim_writes import offer_row
from polpo.store.identity import StoreLost
from polpo.store.outage_wait import OutageWait
from polpo.store.protocol import Store

if TYPE_CHECKING:
    from polpo.engine.cluster_source import ClaimQueueLike
    from polpo.engine.commands import Commands
    from polpo.engine.dispatcher import Dispatcher
    from polpo.engine.recovery import Recovery

log = logging.getLogger("polpo.cluster")

__all__ = ["ClusterRole"]

RUNNING_STATES = (TaskStatus.ASSIGNED, TaskStatus.IN_PROGRESS, TaskStatus.REVIEW)


class ClusterRole:
    def __init__(self, *, store: Store, board: MissionBoard, dispatcher: Dispatcher, recovery: Recovery,
                 commands: Commands, queue: ClaimQueueLike, node: str, own: set[str] | None = None) -> None:
        self.store = store
        self.board = board
        self.dispatcher = dispatcher
        self.recovery = recovery
        self.commands = commands
        self.queue = queue
        self.node = node
        self.own = set() if own is None else own  # the claim source's claims this node knowingly holds
        self.leader = False
        self._terms = 0  # this node's terms as leader so far
        self.store.term = 0  # a cluster node's decisions are written only while it leads (Tx.decided)
        self._inbox: list[Event] = []
        self._wake = anyio.Event()
        self._term = anyio.CancelScope()  # the leader-only loops of the current term
        self._following = OutageWait("following other nodes' events", log)
        self._sweeping = OutageWait("the sweep for dead nodes", log)

    # -- other nodes' events --------------------------------------------------------------------------------
    def on_remote(self, events: list[Event]) -> None:
        self._inbox.extend(events)
        self._wake.set()

    async def run(self) -> None:
        """Apply other nodes' events, in order, as they come (one batch at a time). Through a database outage a
        batch is kept and applied again (applying is idempotent: each task is read back as stored): a finish
        that were dropped here would leave its dependents never offered, and the mission stuck."""
        while True:
            if not self._inbox:
                self._wake = anyio.Event()
                await self._wake.wait()
            events, self._inbox = self._inbox, []
            try:
                await self._apply(events)
                self._following.ok()
            except Exception as e:
                delay = self._following.failed(e)
                if delay is None:  # one bad batch never stops following
                    log.exception("could not apply %d event(s) from other nodes", len(events))
                    continue
                self._inbox[:0] = events  # before what came meanwhile: the order is kept
                await anyio.sleep(delay)

    async def _apply(self, events: Sequence[Event]) -> None:
        changed: dict[str, list[str]] = {}  # mission -> tasks another node changed, in order
        for ev in events:
            if ev.event == "task:stop-requested" and ev.data.get("node") == self.node and ev.task_id:
                self.dispatcher.stop_task(ev.task_id, StopReason(ev.data["reason"]))
            elif ev.event == "mission:completed" and ev.mission_id:
                self.board.leave(ev.mission_id)
            elif self.leader and ev.event == "task:transition" and ev.task_id in self.board.tasks \
                    and ev.task_id not in self.dispatcher.running and ev.mission_id:
                ids = changed.setdefault(ev.mission_id, [])
                if ev.task_id not in ids:
                    ids.append(ev.task_id)
        for mid, ids in changed.items():
            m = self.board.missions.get(mid)
            if m is not None:
                await self.follow(m, ids)

    async def follow(self, m: Mission, task_ids: Sequence[str]) -> None:
        """The leader's copy catches up with tasks other nodes changed; a task that finished there is decided
        here, once: its dependents, gates, the mission's completion."""
        fresh = await self.queue.fresh_tasks(m, task_ids)
        for tid in task_ids:
            task = m.tasks.get(tid)
            if task is None or tid not in fresh or tid in self.dispatcher.running or m.id not in self.board.missions:
                continue
            stored, attempt = fresh[tid]
            if stored.terminal and not task.terminal:  # it ran there: the report counts its turns and reviews
                await self.store.read_task_spend(m, tid)
                if m.id not in self.board.missions or tid in self.dispatcher.running:
                    continue  # this node stepped down, or claimed the task again, meanwhile
            old = task.status
            refresh(task, stored)
            if attempt is not None and not task.terminal:
                self.board.attempts[tid] = attempt
            if task.status is old:
                continue
            if task.terminal and not old.terminal:
                self.board.after_change(task)
            elif task.status is TaskStatus.PENDING:
                self.board.make_ready(task)

    async def apply_command(self, kind: str, target: str) -> tuple[str, str]:
        """A command from this node's HTTP API: the leader applies it; another node relays it to the leader."""
        if self.leader:
            return await self.commands.apply(kind, target)
        return await self.queue.relay(kind, target)

    # -- the leader -----------------------------------------------------------------------------------------
    async def lead(self, load: Callable[[], Awaitable[None]]) -> None:
        """This node was elected: the missions it visited become its own, every open mission is loaded, dead
        nodes' claims are recovered, and what the old leader left undecided is decided (the start-up path)."""
        self._terms += 1
        self.store.term = self._terms  # decisions of an earlier term still queued are not written
        for m in list(self.board.visiting.values()):
            await self._promote(m)
        self.leader = True
        await load()
        await self.store.commit(self.store.tx().event(ClusterLeader(node=self.node,
                                                                    missions=len(self.board.missions))))
        await self.sweep()
        await self._unclaimed_runs()
        for m in list(self.board.missions.values()):
            await self.recovery.settle(m)

    def start_term(self, tg: TaskGroup, loops: Sequence[Callable[[], Coroutine[Any, Any, None]]]) -> None:
        """The leader-only loops of this term (intake, command inbox, dead nodes' claims): they run until
        :meth:`abdicate`."""
        self._term.cancel()
        self._term = term = anyio.CancelScope()

        async def leading() -> None:
            with term:
                async with anyio.create_task_group() as inner:
                    for loop in loops:
                        inner.start_soon(loop)
        tg.start_soon(leading)

    def abdicate(self) -> None:
        """Leadership lost (its term ended at the database): no mission decision is made here from now on — the
        missions leave the board at once; this node's running turns go on as any node's do. It competes for the
        term again; if it wins, :meth:`lead` loads and settles everything as at start-up."""
        self._term.cancel()
        self.store.term = 0  # what this term decided and has not written yet is not written (Tx.decided)
        if not self.leader:
            return
        self.leader = False
        self.board.step_down(self.dispatcher.running)

    async def _promote(self, m: Mission) -> None:
        """A visited mission, caught up with the store and put on this node's board (its turns keep the same
        objects)."""
        ids = [t for t in m.tasks if t not in self.dispatcher.running]
        fresh = await self.queue.fresh_tasks(m, ids)
        for tid, (stored, attempt) in fresh.items():
            refresh(m.tasks[tid], stored)
            if attempt is not None and not stored.terminal:
                self.board.attempts[tid] = attempt
        m.gate_state = {k: GateStatus(v) for k, v in (await self.queue.mission_gates(m.id)).items()}
        self.board.visiting.pop(m.id, None)
        loaded = await self.store.load_mission(m.id)
        if loaded is None or not loaded.mission.status.open:
            return  # it finished meanwhile
        m.status = loaded.mission.status
        m.holds = loaded.mission.holds  # checkpoints and delays as stored
        wire(m)
        self.board.add(m)

    async def sweeps(self) -> None:
        """The leader, every third of the lease: :meth:`sweep`."""
        while True:
            await anyio.sleep(self.queue.lease / 3)
            try:
                await self.sweep()
                self._sweeping.ok()
            except StoreLost:  # this node lost its lease (fenced) or its store: it is leaving
                return
            except Exception as e:
                if self._sweeping.failed(e) is None:
                    log.exception("the sweep for dead nodes failed; trying again")

    async def sweep(self) -> None:
        """Claims of nodes whose lease ran out: taken over and recovered (the leader does this every lease/3)."""
        dead = await self.queue.dead()
        by_node: dict[str, list[str]] = {}
        for d in dead:
            if await self.queue.take_over(d):
                by_node.setdefault(d.node, []).append(d.task_id)
                await self._recover_held(d)
        for node, tasks in by_node.items():
            self.store.submit(self.store.tx().event(ClusterNodeLost(node=node, tasks=tasks)))

    async def _recover_held(self, d: DeadClaim) -> None:
        """Recover a claim this node has taken over; through an outage, again until it is done (the claim is
        this node's now: given up, it would stay held by a live node and its task would never run again). A node
        that lost its lease or its store meanwhile raises :class:`StoreLost`: it is leaving, and the next leader
        takes this claim over as one of a dead node's (nemesis seed 14822: it was logged as an error, with a
        traceback)."""
        self.own.add(d.task_id)  # not a claim lost by a claimer (cluster_source gives those back)
        try:
            while True:
                try:
                    await self._recover(d)
                    self._sweeping.ok()
                    return
                except StoreLost:
                    raise
                except Exception as e:
                    delay = self._sweeping.failed(e)
                    if delay is None:
                        log.exception("could not recover task %s of node %s", d.task_id, d.node)
                        return
                    await anyio.sleep(delay)
        finally:
            if d.task_id not in self.dispatcher.running:
                self.own.discard(d.task_id)

    async def _recover(self, d: DeadClaim) -> None:
        task = self.board.tasks.get(d.task_id)
        m = self.board.missions.get(task.mission_id) if task is not None else None
        if task is None or m is None or d.task_id in self.dispatcher.running:
            if d.task_id not in self.dispatcher.running:
                await self.queue.end(d.task_id, requeue=False)
            return
        await self.follow(m, [task.id])
        decided = task.terminal  # a finish follow() read is decided there: not a second time below
        tx = self.store.tx()
        attempt = self.board.attempts.get(task.id)
        self.recovery.recover_task(tx, m, task, attempt, [], why=f"node {d.node} stopped while the agent ran")
        if d.stop and not task.terminal:
            trigger, why = ((Trigger.SLA_FAIL, "SLA violated: deadline passed") if d.stop == StopReason.SLA
                            else (Trigger.CANCEL, "mission cancelled"))
            self.board.transition(tx, task, trigger, why)
        await self.store.commit(tx)
        if task.terminal and not decided:
            self.board.after_change(task)
        await self.store.flush()
        requeue = task.status in (TaskStatus.PENDING, TaskStatus.REVIEW) and m.status is MissionStatus.RUNNING
        await self.queue.end(task.id, requeue=requeue)

    async def _unclaimed_runs(self) -> None:
        """Tasks recorded as running with no claim at all (written before this database had claims)."""
        running = [t for t in self.board.tasks.values() if t.status in RUNNING_STATES
                   and t.id not in self.dispatcher.running]
        if not running:
            return
        for t in running:
            slot = self.dispatcher.slot(t)
            if await self.queue.hold(offer_row(t, self.board.missions[t.mission_id], slot.limit_key,
                                               slot.max_concurrency)):
                await self._recover_held(DeadClaim(t.id, "an earlier daemon", "", None))
