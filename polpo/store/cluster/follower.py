"""Every node's ``events.jsonl`` holds every event of the cluster, in global ``seq`` order: one follower per
node reads the events table after the last ``seq`` it wrote and appends them, its own node's included.

Wake-ups come from ``LISTEN`` on a connection of its own (a pooled one would drop its listeners): each batch's
transaction sends ``NOTIFY polpo_events`` at its commit, and this node's own commits poke the follower directly.
A slow safety read every few seconds covers notifications lost while the connection was down (PostgreSQL does
not queue them for a disconnected listener). Event numbers are commit-ordered across nodes
(:mod:`polpo.store.postgres`), so reading ``seq > last`` never skips an event that commits later.

Events from other nodes are also handed to ``on_remote`` (the engine's side: the leader follows tasks other nodes
run; a node stops a run the leader cancelled). ``on_claims`` wakes the dispatcher when a task is offered.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from polpo.events.catalog import Event
from polpo.events.log import EventLog
from polpo.store.claim_writes import CLAIMS_CHANNEL
from polpo.store.outage_wait import OutageWait
from polpo.store.postgres import EVENTS_CHANNEL
from polpo.store.postgres_conn import PgTarget

log = logging.getLogger("polpo.cluster")

__all__ = ["EventFollower"]

SAFETY_SWEEP = 5.0  # seconds: a read even without a notification (one lost while reconnecting)
PAGE = 5000  # events read at once


class EventFollower:
    def __init__(self, target: PgTarget, read_after: Callable[[int, int], Awaitable[list[Event]]], log_: EventLog,
                 node: str, *, on_remote: Callable[[list[Event]], None], on_claims: Callable[[], None]) -> None:
        self.target = target
        self.read_after = read_after
        self.log = log_
        self.node = node
        self.on_remote = on_remote
        self.on_claims = on_claims
        self.deliver_after = 0  # events up to this seq happened before this daemon started: logged, not delivered
        self._wake = anyio.Event()
        self.ready = anyio.Event()
        self._reads = OutageWait("the event follower", log)

    def poke(self) -> None:
        self._wake.set()

    async def start(self, max_seq: int) -> None:
        """Catch the log up with what the database holds (before the engine loads anything)."""
        self.deliver_after = max_seq
        await self._drain()

    async def run(self) -> None:
        wait = OutageWait("the event follower's connection", log)
        while True:
            try:
                conn = await self._connect()
                wait.ok()
            except Exception as e:  # reads go on meanwhile (each waits out the outage itself)
                if wait.failed(e) is None:
                    log.warning("event follower cannot connect (%s); reading every %g s meanwhile", e, SAFETY_SWEEP)
                await self._sweep_for(SAFETY_SWEEP * 2, None)
                continue
            try:
                await self._follow(conn)
            except Exception as e:
                log.warning("event follower lost its connection (%s); reconnecting", e)
            finally:
                with anyio.CancelScope(shield=True):
                    try:
                        await conn.close(timeout=2)
                    except Exception:
                        conn.terminate()

    async def _connect(self) -> Any:
        import asyncpg

        conn = await asyncpg.connect(self.target.url, password=self.target.password, timeout=15)
        await conn.add_listener(EVENTS_CHANNEL, lambda *_a: self._wake.set())
        await conn.add_listener(CLAIMS_CHANNEL, lambda *_a: self.on_claims())
        return conn

    async def _follow(self, conn: Any) -> None:
        lost = anyio.Event()
        conn.add_termination_listener(lambda _c: lost.set())
        self.on_claims()  # offers made while not listening
        await self._sweep_for(None, lost)

    async def _sweep_for(self, total: float | None, lost: anyio.Event | None) -> None:
        end = None if total is None else anyio.current_time() + total
        while end is None or anyio.current_time() < end:
            try:
                await self._drain()
            except Exception as e:  # the database is away: the log waits for it (it has every event stored)
                if self._reads.failed(e) is None:
                    raise
            else:
                self._reads.ok()
                self.ready.set()
            with anyio.move_on_after(SAFETY_SWEEP):
                await self._wake.wait()
            self._wake = anyio.Event()
            if lost is not None and lost.is_set():
                raise OSError("connection closed")

    async def drain(self) -> None:
        """Write every committed event the log lacks (also at shutdown, after the last commit)."""
        await self._drain()

    async def _drain(self) -> None:
        while True:
            events = await self.read_after(self.log.last_seq, PAGE)
            if not events:
                return
            self.log.write_many(events)
            remote = [ev for ev in events if ev.seq > self.deliver_after and ev.node != self.node]
            if remote:
                self.on_remote(remote)
            if len(events) < PAGE:
                return
