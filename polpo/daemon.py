"""The composition root: open the store, recover, then run intake, dispatcher and command inbox.

Runs in the foreground (systemd/supervisor style). SIGTERM or SIGINT: stop taking files, stop dispatching,
give running agents ``[daemon] shutdown_grace`` seconds, then kill their process groups; state stays
consistent and the next start resumes. Under systemd (``Type=notify``) it reports ready once it watches the
missions folder and serves its API. With ``[http] listen`` the API, ``/metrics`` and the web view run in the same
task group (see :mod:`polpo.http`); with ``OTEL_*`` set and ``polpo[otel]`` installed, traces are exported.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from polpo.agents.registry import AgentFactory
from polpo.attention.digest import Digest
from polpo.clock import Clock, SystemClock
from polpo.config import Config
from polpo.console import WANTED, ConsolePrinter, ConsoleView, use_color
from polpo.daemon_events import record_shutdown, say_started
from polpo.daemon_locks import DaemonLocks
from polpo.engine.engine import Engine
from polpo.engine.sla import event_channels
from polpo.events import catalog as E
from polpo.events.catalog import Event
from polpo.events.log import EventLog
from polpo.extras import require
from polpo.http.auth import http_plan
from polpo.intake.handler import IntakeHandler
from polpo.intake.watcher import Intake
from polpo.llm.client import load_litellm
from polpo.llm.secrets import load_env_file
from polpo.notify.config import notify_config
from polpo.notify.router import Notifier
from polpo.notify.scopes import ScopeRegistry
from polpo.retention.wiring import Keeping, keeping
from polpo.sdnotify import notify as sd_notify
from polpo.shutdown import MARGIN, LastResort, StopSteps
from polpo.sla.monitor import SlaMonitor, Timers
from polpo.stop_signals import StopControls, receive_signals
from polpo.store import read
from polpo.store.identity import StoreLost, verify
from polpo.store.open import open_store
from polpo.store.protocol import Store, StoreError
from polpo.store.readers import ReaderPool
from polpo.telemetry.otel import start_tracing
from polpo.telemetry.otel import wanted as tracing_wanted
from polpo.tools.childwatch import pidfd_child_watcher
from polpo.tools.guard_link import GuardLink
from polpo.tools.marks import daemon_mark
from polpo.tools.procs import kill_running

if TYPE_CHECKING:
    from polpo.http.service import HttpService
    from polpo.store.cluster.node import ClusterNode

log = logging.getLogger("polpo.daemon")

JANITOR_INTERVAL = 5.0  # seconds between two orphan sweeps outside the end of a task's turn
HEARTBEAT = 60.0  # seconds between two "still running" lines for one attempt


class DaemonError(Exception):
    pass


class Daemon:
    def __init__(self, cfg: Config, *, clock: Clock | None = None, console: TextIO | None = sys.stderr,
                 handle_signals: bool = True, agents: AgentFactory | None = None, heartbeat: float = HEARTBEAT,
                 on_ready: Callable[[Daemon], None] | None = None, archive_log: bool = False) -> None:
        check_extras(cfg)  # a feature asked for without its library stops the start here, in one line
        self.cfg = cfg
        self.on_ready = on_ready  # called once every start-up check has passed and the daemon watches its folder
        self.archive_log = archive_log  # --archive-log: a store the log was not written from begins a new log
        self.clock = clock or SystemClock()
        self.console = console
        self.handle_signals = handle_signals
        self.agents = agents
        self.started = anyio.Event()
        self.engine: Engine | None = None
        self.store: Store | None = None
        self.intake: Intake | None = None
        self.keeping: Keeping | None = None
        self._stop = anyio.Event()
        self._fatal: str | None = None  # why this node left its cluster (the daemon then exits 1)
        self._cluster: ClusterNode | None = None
        self.locks = DaemonLocks(cfg)  # its state folder's and its missions folder's
        self._guard = GuardLink(None, on_lost=self._lost,  # a cluster node's own replaces it (with its lease)
                                marker=daemon_mark(cfg.state_dir))
        self._steps: StopSteps | None = None
        self._last_resort = LastResort(kill_running)
        self._printer: ConsolePrinter | None = None
        self._view = ConsoleView(color=use_color(console), heartbeat=heartbeat)
        self.notify = notify_config(cfg)  # a bad channel config stops the start, with the reason
        self.http_plan = http_plan(cfg)  # a non-loopback address without a token stops the start
        self.http: HttpService | None = None
        self.readers = ReaderPool(lambda: read.open_reader(cfg, threads=True))  # no connection until used

    def request_stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        cfg = self.cfg
        cfg.state_dir.mkdir(parents=True, exist_ok=True)
        self.locks.take_state()
        if cfg.llm.env_file is not None:
            load_env_file(cfg.llm.env_file)  # names only are ever logged, never values
        store = await open_store(cfg, self.clock)
        self.store = store
        store.node = cfg.daemon.node
        store.event_log = EventLog(cfg.events_path)
        store.on_lost = self._store_lost
        cluster: ClusterNode | None = None
        try:
            verify(store.identity, store.last_seq, store.where, store.event_log, archive_log=self.archive_log)
            self.locks.take_folder(store.identity)
            if cfg.store.url is not None:
                cluster = self._cluster = await self._join_cluster(store)
                cluster.fence.on_fenced.append(self._lost)  # a refused write: this node lost its tasks
                self._guard = cluster.guard
            else:
                await store.catch_up_log()
                self._guard.start()  # no lease: it kills the agents only when this daemon dies
        except BaseException:
            with anyio.CancelScope(shield=True):
                await store.close()
                self._guard.close()
            self.locks.release()
            raise
        if self.console is not None:
            self._printer = ConsolePrinter(self.console)
            store.subscribe(self._print)
        engine = Engine(cfg, store, self.clock, self.agents or AgentFactory(cfg, self.clock),
                        cluster=None if cluster is None else cluster.queue)
        self.engine = engine
        if cluster is not None:
            cluster.follower.on_remote = self._remote_events
            cluster.follower.on_claims = engine.dispatcher.wake
        notifier = Notifier(self.notify, clock=self.clock,
                            on_failed=lambda ch, ev, err: self._notification(ch, ev, err),
                            on_sent=lambda ch, ev: self._notification(ch, ev, None),
                            scopes=ScopeRegistry(engine.board.find))  # missions' own rules

        def route(ev: Event) -> None:
            notifier.route(ev, event_channels(cfg.sla, ev))

        store.subscribe(route)
        self.sla_monitor = SlaMonitor(engine.sla.check, self.clock, cfg.sla.check_interval)
        digest = [] if self.notify.digest is None else [SlaMonitor(  # what waits for a person, to the channels
            Digest(store, self.readers.run).tick, self.clock, self.notify.digest, run_at_start=False)]
        monitor = Timers(self.sla_monitor, *digest)
        handler = IntakeHandler(engine.admission, known_agents=engine.agents.known_names(),
                                channels=set(self.notify.channels), schedules=engine.schedules)
        intake = Intake(cfg.missions_dir, handler, force_polling=cfg.daemon.force_polling,
                        max_bytes=cfg.daemon.max_mission_bytes, faults=handler, unchanged=handler.unchanged)
        self.intake = intake
        self.keeping = kept = keeping(cfg, store, self.clock, engine, intake.turn)  # retention: the pruner, filed files
        try:
            if self.http_plan is not None:
                # lazy for start-up time and memory: the web stack (uvicorn, starlette, prometheus) only when asked
                from polpo.http.service import HttpService

                self.http = HttpService(cfg, self.http_plan, store, engine, channels=set(self.notify.channels),
                                        readers=self.readers, reviews=self._reviews, offer=intake.offer)
                try:
                    self.http.bind()
                except OSError as e:
                    raise DaemonError(f"cannot listen on {cfg.http.listen} ([http] listen): {e.strerror or e}") from None
            if cluster is None:
                await engine.load()  # with several daemons, the leader loads the missions once elected
            with pidfd_child_watcher():
                await self._serve(store, engine, notifier, monitor, intake, kept, cluster)
        finally:
            with anyio.CancelScope(shield=True):
                if self.http is not None:
                    self.http.close()
                steps = self._steps or StopSteps.of(self.cfg, self.clock)
                await steps.step("closing the readers", self.readers.close)
                await steps.step("closing the store", store.close)  # (a pool that cannot close is terminated)
                self._guard.close()
            if self._printer is not None:
                self._printer.close()
            self.locks.release()
            self._last_resort.disarm()
        if store.lost is not None:
            raise StoreLost(store.lost)
        if self._fatal is not None:
            raise DaemonError(f"stopped: {self._fatal}")

    async def _join_cluster(self, store: Store) -> ClusterNode:
        from polpo.store.cluster.node import (
            ClusterNode,  # asyncpg and the cluster: only for a PostgreSQL store
        )

        return await ClusterNode.join(self.cfg, store)

    def _remote_events(self, events: list[Event]) -> None:
        """Other nodes' events: to the engine (the leader follows their tasks) and to this node's API stream."""
        assert self.engine is not None and self.engine.cluster is not None
        self.engine.cluster.on_remote(events)
        if self.http is not None:
            for ev in events:
                self.http.hub.publish(ev)

    def _lost(self, reason: str) -> None:
        """This node can no longer take part in the cluster (its lease or leadership is gone, or about to be), or
        keep a guard for its agents: its agents are killed now, it writes nothing more (its runs end quietly, never
        as failures) and it exits (1); the others take its tasks over. A supervisor (systemd) starts it again."""
        if self._fatal is None:
            self._fatal = reason
            if self._cluster is not None:
                log.error("leaving the cluster: %s; started again (by its service manager) it rejoins as a new "
                          "member", reason)
                self._cluster.fence.trip(reason)  # its agents are killed and the store writes nothing more
            else:
                log.error("stopping: %s; started again (by its service manager) it resumes", reason)
                kill_running()
            self.request_stop()

    def _store_lost(self, reason: str) -> None:
        """The database was deleted or replaced: the writer has stopped; agents are stopped at once, and it exits (1)."""
        self._fatal = reason
        self.request_stop()

    async def _serve(self, store: Store, engine: Engine, notifier: Notifier, monitor: Timers,
                     intake: Intake, keeping: Keeping, cluster: ClusterNode | None = None) -> None:
        """Everything runs in one task group until a stop is requested; then stop in order and drain."""
        cfg = self.cfg
        async with anyio.create_task_group() as tg:
            if self.handle_signals:  # before anything says the daemon started: a logrotate SIGHUP never kills it
                await tg.start(receive_signals, self._stop_controls())
            tg.start_soon(store.run_writer)
            tg.start_soon(store.watch_identity)
            try:
                await say_started(store, cfg, engine)
            except StoreLost as e:  # fenced before it could say it started (a start slower than its lease: seed
                self._fatal = self._fatal or str(e)  # 46216), or its database gone: it stops saying why, in one
                tg.cancel_scope.cancel()  # line, and its service manager starts it again (a new member)
                return
            tg.start_soon(notifier.run)
            if cfg.judge.panel_models() or any(a.type == "llm" for a in cfg.agents.values()):
                tg.start_soon(load_litellm)  # ~4 s, in a thread: the first review or LLM turn won't wait
            pruner, filing = keeping.pruner, keeping.filing
            if filing is not None:
                tg.start_soon(filing.run)
            if cluster is None:
                await engine.recover()
                monitor.start()
                tg.start_soon(intake.run)
                tg.start_soon(engine.commands.run_inbox)
                tg.start_soon(engine.schedules.run)
                tg.start_soon(pruner.run)
            else:
                role = engine.cluster
                assert role is not None

                async def elected() -> None:  # this node now leads: it accepts files and decides for missions
                    await role.lead(engine.load)
                    monitor.start()
                    role.start_term(tg, [intake.run, engine.commands.run_inbox, role.sweeps, engine.schedules.run,
                                         pruner.run])

                async def deposed(_reason: str) -> None:  # its term ended: no decision from now on, at once
                    role.abdicate()  # (and the term's loops end)
                    assert cluster is not None
                    cluster.fence.leader_term = None  # its own writes go on under its lease alone
                    await monitor.shutdown(0.0)

                tg.start_soon(cluster.membership.run, self._lost)
                tg.start_soon(cluster.follower.run)
                tg.start_soon(role.run)
                tg.start_soon(cluster.leadership.run, elected, deposed)
            tg.start_soon(self._guard.run)  # a guard that dies or stops is replaced at once
            tg.start_soon(engine.run, tg)
            tg.start_soon(self._janitor, engine)
            tg.start_soon(self.readers.maintain)  # idle reader connections close after a burst
            if self.http is not None:
                self.http.start(tg)
            tracing = start_tracing(store, self._reviews, self._transcript)
            if tracing is not None:
                tg.start_soon(tracing.run)
            if self._printer is not None:
                tg.start_soon(self._heartbeats)
            # ready once the folder is scanned (a cluster node: once the event log caught up); a stop asked before
            # that (a node that lost its lease while the database was away) is not held until then (seed 12431)
            if await _first(intake.ready if cluster is None else cluster.follower.ready, self._stop) is not self._stop:
                self.started.set()
                if self.on_ready is not None:
                    self.on_ready(self)
                sd_notify(f"READY=1\nMAINPID={os.getpid()}\nSTATUS=watching {cfg.missions_dir}"
                          + (f"; API at {self.http.url}" if self.http is not None else ""))
                await self._stop.wait()
            sd_notify("STOPPING=1")
            grace = 0.0 if self._fatal else cfg.daemon.shutdown_grace.total_seconds()
            steps = self._steps = StopSteps.of(cfg, self.clock)  # each step has a deadline (a half-open network…)
            self._last_resort.arm(grace + steps.budget + MARGIN, lambda: self._fatal or "asked to stop")
            intake.stop()
            await steps.step("the SLA monitor", monitor.shutdown)
            await steps.step("stopping the runs", lambda: engine.stop(grace), extra=grace)
            await steps.step("recording the shutdown", lambda: record_shutdown(store, engine))
            await steps.step("the notifications", lambda: notifier.drain(5.0))  # their outcomes are events too
            if cluster is not None:  # every write is made before the node leaves: after it, none can be (12466)
                await steps.step("the last writes", cluster.flush)
                await steps.step("the event log's last read", cluster.follower.drain)
            if self.http is not None:
                await steps.step("the API", self.http.stop)  # after the shutdown event, so followers see it
            if cluster is not None:
                await steps.step("leaving the cluster", cluster.leave)  # the others see it at once
            if tracing is not None:
                tracing.shutdown()
            tg.cancel_scope.cancel()

    def _notification(self, channel: str, event: str, error: str | None) -> None:
        """Delivery outcomes are events too (never routed to channels, so they cannot loop)."""
        if self.store is None:
            return
        payload = (E.NotificationSent(channel=channel, event=event) if error is None
                   else E.NotificationFailed(channel=channel, event=event, error=error))
        with contextlib.suppress(StoreError):  # the store may be closing at shutdown
            self.store.submit(self.store.tx().event(payload))

    def _stop_controls(self) -> StopControls:
        def running() -> list[str]:
            return list(self.engine.dispatcher.running) if self.engine is not None else []

        def cut_grace() -> list[str]:
            return self.engine.dispatcher.cut_grace() if self.engine is not None else []

        printer = self._printer  # the stop's lines in the console's own format, beside the events' lines
        say = None if printer is None else (lambda text: printer.print(self._view.note("daemon:stopping", text)))
        return StopControls(self.request_stop, self.reopen_log, running, cut_grace,
                            self.cfg.daemon.shutdown_grace.total_seconds(), say)

    async def _janitor(self, engine: Engine) -> None:
        """Every few seconds: end what finished attempts left behind (escapees adopted late)."""
        while True:
            await anyio.sleep(JANITOR_INTERVAL)
            engine.sweep_orphans()

    def reopen_log(self) -> None:
        if self.store is not None and self.store.event_log is not None:
            try:
                self.store.event_log.reopen()
            except OSError as e:  # (a full or read-only disk…) the next write opens it again, or waits with the log
                log.warning("could not reopen %s: %s; the next write tries again", self.cfg.events_path, e)
                return
            log.warning("reopened %s", self.cfg.events_path)

    def _print(self, ev: Event) -> None:
        if ev.event in WANTED:
            assert self._printer is not None
            for line in self._view.lines(ev.to_json_dict(), time.monotonic()):
                self._printer.print(line)

    async def _heartbeats(self) -> None:
        """A line for each attempt that runs long, every ``heartbeat`` seconds (see ConsoleView)."""
        assert self._printer is not None
        while True:
            await anyio.sleep(max(0.05, self._view.heartbeat_every / 4))
            for line in self._view.heartbeat(time.monotonic()):
                self._printer.print(line)

    async def _reviews(self, task_id: str, check_idx: int) -> list[dict[str, Any]]:
        """The latest panel's stored reviewer traces of a task's review check (for metrics and traces)."""
        return await self.readers.run(lambda con: read.latest_reviews(con, task_id, check_idx))

    async def _transcript(self, task_id: str, number: int) -> list[dict[str, Any]]:  # an attempt's, for spans
        return await self.readers.run(lambda con: read.transcript(con, f"{task_id}/{number}") or [])


def check_extras(cfg: Config) -> None:
    """Every optional extra the config and the environment ask for is installed (else :class:`MissingExtra`)."""
    if cfg.store.url is not None:
        require("postgres", "[store] url")
    if tracing_wanted():
        require("otel", "tracing (OTEL_* is set)", "; or set OTEL_SDK_DISABLED=true to run without traces")


async def _first(*events: anyio.Event) -> anyio.Event:
    """The first of ``events`` to be set (waiting for it)."""
    done: list[anyio.Event] = []
    async with anyio.create_task_group() as tg:
        async def wait(event: anyio.Event) -> None:
            await event.wait()
            done.append(event)
            tg.cancel_scope.cancel()
        for event in events:
            tg.start_soon(wait, event)
    return done[0]
