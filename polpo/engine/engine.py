"""The engine: its parts, wired. Each part has one job and receives only what it needs.

* :class:`~polpo.engine.board.MissionBoard` — the running missions and every change to their tasks' states;
* :class:`~polpo.engine.dispatcher.Dispatcher` — one loop: turns claimed from its task source, run, finished;
* a task source (:mod:`polpo.engine.sources`) — this node's ready queue, or the cluster's claim queue;
* :class:`~polpo.engine.runner.TaskRunner` — one attempt: run, store, assess, decide;
* :class:`~polpo.engine.commands.Commands` — cancel / retry / approve and the command inbox;
* :class:`~polpo.engine.admission.Admission` — what mission files became: ids, runs, workspaces;
* :class:`~polpo.engine.schedules.Scheduler` — scheduled mission files: each firing starts a run;
* :class:`~polpo.engine.recovery.Recovery` — the board rebuilt from the store after a restart or a crash;
* :class:`~polpo.engine.sla.SlaKeeper` — deadlines;
* :class:`~polpo.engine.isolation.Isolation` — per-task git worktrees and the mission's result branch;
* :class:`~polpo.changes.tracker.ChangeTracker` — which files each attempt changed;
* :class:`~polpo.engine.cluster_role.ClusterRole` — with several daemons: other nodes' events, dead nodes, the leader.

A single daemon is a one-node cluster that always leads: the same board decides for missions, the same
dispatcher loop runs tasks, the same recovery runs after a crash; only the task source differs.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable

from anyio.abc import TaskGroup

from polpo.agents.registry import AgentFactory
from polpo.assessment.pipeline import Assessor
from polpo.changes.tracker import ChangeTracker
from polpo.clock import Clock
from polpo.config import Config
from polpo.engine.admission import Admission
from polpo.engine.answerer import answerer_from_config
from polpo.engine.board import MissionBoard
from polpo.engine.cluster_role import ClusterRole
from polpo.engine.cluster_source import ClaimQueueLike, ClusterSource
from polpo.engine.commands import Commands
from polpo.engine.dispatcher import Dispatcher
from polpo.engine.handles import RunHandle
from polpo.engine.isolation import Isolation
from polpo.engine.questions import Questions
from polpo.engine.recovery import Recovery
from polpo.engine.runner import TaskRunner
from polpo.engine.schedules import Scheduler
from polpo.engine.sla import SlaKeeper
from polpo.engine.sources import LocalSource, TaskSource
from polpo.engine.spend_book import SpendBook
from polpo.mission.security import unreachable, workspace_roots
from polpo.model.records import Mission, Task
from polpo.store.protocol import Store
from polpo.store.tx import Tx
from polpo.tools.marks import attempt_mark
from polpo.tools.orphans import sweep
from polpo.tools.procs import RUNNING

__all__ = ["SWEEP_EVERY", "Engine"]

log = logging.getLogger("polpo.engine")

SWEEP_EVERY = 0.2  # seconds: the most often a task's end triggers an orphan sweep (see Engine._after_release)


class Engine:
    def __init__(self, cfg: Config, store: Store, clock: Clock, agents: AgentFactory, *,
                 cluster: ClaimQueueLike | None = None) -> None:
        """``cluster``: the cluster's claim queue when several daemons share the store (this node's name is its
        ``node``); without it, this daemon is a one-node cluster on its own ready queue."""
        self.cfg = cfg
        self.store = store
        self.clock = clock
        self.agents = agents
        self._last_sweep = -math.inf
        self.spend = SpendBook(cfg, store, clock)  # budgets (polpo.engine.spend_book)
        self._sweep_due = False
        self.board = MissionBoard(cfg, store, clock, on_ready=lambda t: self.dispatcher.make_ready(t),
                                  on_forget=self._forget)
        source: TaskSource
        own: set[str] = set()  # with a cluster: the claims this node knowingly holds (its source's, its recoveries)
        if cluster is None:
            source = LocalSource(self.board, cfg.daemon.max_concurrency, slot_of=lambda t: self.dispatcher.slot(t),
                                 wake=lambda: self.dispatcher.wake(), paused=self.spend.paused_key)
            self.spend.on_resume = source.unpause
        else:
            roots = workspace_roots(cfg)
            source = ClusterSource(store=store, board=self.board, queue=cluster,
                                   slot_of=lambda t: self.dispatcher.slot(t),
                                   unreachable=lambda ws, node: unreachable(ws, roots, node))
            own = source.own
        self.dispatcher = Dispatcher(self.board, agents, cfg.daemon.max_concurrency, self._run_task, source,
                                     on_release=self._after_release, away=store.away,
                                     ended=lambda: store.fenced is not None or store.lost is not None)
        self.admission = Admission(cfg, store, clock, self.board, agents)
        self.recovery: Recovery
        self.schedules = Scheduler(store, clock, self.admission, cancel=lambda mid, by: self.commands.cancel(mid, by))
        # what agents ask of people (polpo.engine.questions): asked by the runner, answered through commands
        self.questions = Questions(cfg, store, clock, self.board, answerer_from_config(cfg, agents.llm))
        self.commands = Commands(cfg, store, clock, self.board, self.dispatcher,
                                 load=lambda mid: self.recovery.load_mission(mid), admission=self.admission,
                                 schedules=self.schedules, spend=self.spend, questions=self.questions)
        self.sla = SlaKeeper(cfg.sla, store, self.board, self.commands.fail_for_sla)
        self.tracker = ChangeTracker(exclude=(cfg.state_dir,))
        self.isolation = Isolation(cfg, store, forget_root=self.tracker.forget)
        self.finished: list[Callable[[Mission], None]] = [lambda m: self.tracker.release(m.workspace)]
        """Told of each mission the board finishes (its workspace's watch goes; the daemon adds the filing)."""
        self.board.hooks = _Hooks(self.sla, self.isolation, self.finished)
        self.assessor = Assessor(cfg, store, clock, agents.llm, workspace_of=self.isolation.workspace_of)
        self.runner = TaskRunner(cfg=cfg, store=store, clock=clock, board=self.board, agents=agents,
                                 questions=self.questions,
                                 slot_of=self.dispatcher.slot, assessor=self.assessor, tracker=self.tracker,
                                 isolation=self.isolation, spend=self.spend)
        self.recovery = Recovery(cfg=cfg, store=store, clock=clock, board=self.board, admission=self.admission,
                                 dispatcher=self.dispatcher, commands=self.commands,
                                 hooks=[self.isolation.reconcile])
        self.cluster = None if cluster is None else ClusterRole(
            store=store, board=self.board, dispatcher=self.dispatcher, recovery=self.recovery,
            commands=self.commands, queue=cluster, node=cluster.node, own=own)

    def _forget(self, m: Mission) -> None:
        self.dispatcher.forget(m)
        self.spend.forget_mission(m.id, list(m.tasks))
        self.schedules.ended(m)

    async def apply_command(self, kind: str, target: str) -> tuple[str, str]:
        """A command from this node's HTTP API (the leader applies it; another node relays it to the leader)."""
        if self.cluster is not None:
            return await self.cluster.apply_command(kind, target)
        return await self.commands.apply(kind, target)

    async def _run_task(self, task: Task, handle: RunHandle) -> None:
        await self.runner.run(task, handle)

    def sweep_orphans(self) -> int:
        """Kill what ended attempts left running in sessions of their own (see :mod:`polpo.tools.orphans`)."""
        self._last_sweep = time.monotonic()

        def is_live(mark: str) -> bool:  # asked only when an adopted process carries a marker (rare)
            return mark in {attempt_mark(self.cfg.state_dir, h.attempt.id)
                            for h in self.dispatcher.running.values() if h.attempt is not None}
        return sweep(RUNNING, is_live)

    def _after_release(self) -> None:
        """A sweep after a task's turn, at most every :data:`SWEEP_EVERY` seconds: a turn that ends sooner after
        the last sweep gets one at the end of that interval (each sweep reads /proc; hundreds of turns a second
        need only a few)."""
        if self._sweep_due:
            return
        wait = self._last_sweep + SWEEP_EVERY - time.monotonic()
        if wait <= 0:
            self.sweep_orphans()
            return
        self._sweep_due = True

        def due() -> None:
            self._sweep_due = False
            try:
                self.sweep_orphans()
            except Exception:
                log.exception("the orphan sweep failed")
        asyncio.get_running_loop().call_later(wait, due)

    async def load(self) -> None:
        """The state earlier daemons left: admitted files, unfinished missions, SLA marks."""
        await self.recovery.load_state()
        await self.spend.load()
        await self.sla.load(list(self.board.missions))
        await self.schedules.load()

    async def recover(self) -> None:
        await self.recovery.recover()

    async def run(self, tg: TaskGroup) -> None:
        tg.start_soon(self.isolation.janitor)
        tg.start_soon(self.spend.keeper)
        tg.start_soon(self.agents.mcp.run)  # the shared MCP servers (polpo.mcp.pool), until the daemon stops
        await self.dispatcher.run(tg)

    async def stop(self, grace: float) -> None:
        await self.dispatcher.stop(grace)
        self.tracker.shutdown()


class _Hooks:
    """What the board calls when tasks and missions finish: the SLA keeper's marks, the isolation's report, and
    whoever else asked (``finished``: the filing of finished missions' files)."""

    def __init__(self, sla: SlaKeeper, isolation: Isolation, finished: list[Callable[[Mission], None]]) -> None:
        self.sla = sla
        self.isolation = isolation
        self.finished = finished

    def on_task_terminal(self, tx: Tx, task: Task, mission: Mission) -> None:
        self.sla.on_task_terminal(tx, task, mission)

    def on_mission_complete(self, tx: Tx, mission: Mission) -> None:
        self.isolation.on_mission_complete(tx, mission)
        self.sla.on_mission_complete(tx, mission)
        for fn in self.finished:
            fn(mission)
