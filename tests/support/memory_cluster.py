"""Several real engines in one process on one in-memory database: cluster semantics without PostgreSQL.

    async with memory_cluster(cfg, {"L": {"fake": agent}, "W": {"fake": other}}) as c:
        await c.lead("L")
        m = await c.accept("L", doc)
        await c.wait_event("mission:completed", mission_id=m.id)

Each node is a real :class:`~polpo.engine.engine.Engine` with its own :class:`MemoryStore` (its own writer,
events stamped with its name) on a shared :class:`MemoryDatabase` and its own view of the shared claim queue
(:class:`MemoryClaims`). ``crash(name)`` is ``kill -9``: nothing more of that node is written, its heartbeat
stops; ``sweep(name)`` is the leader's look for dead nodes (the daemon runs it every third of the lease).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import orjson
from anyio.abc import TaskGroup

from polpo.agents.registry import AgentFactory
from polpo.clock import FakeClock
from polpo.config import Config
from polpo.engine.engine import Engine
from polpo.events.catalog import Event
from polpo.mission.loader import load_mission
from polpo.model.records import Mission
from polpo.store.memory import MemoryDatabase, MemoryStore
from polpo.store.memory_claims import MemoryClaims
from tests.support.engine import SeenEvents

LEASE = 2.0


@dataclass
class Node:
    name: str
    store: MemoryStore
    engine: Engine
    queue: MemoryClaims
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    tg: TaskGroup | None = None  # the node's own tasks (cancelled at once by a crash)
    alive: bool = True


@dataclass
class MemoryCluster(SeenEvents):
    cfg: Config
    db: MemoryDatabase
    clock: FakeClock
    tg: TaskGroup
    nodes: dict[str, Node] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)  # every node's events, in commit order
    _changed: anyio.Event = field(default_factory=anyio.Event)

    async def add(self, name: str, agents: Mapping[str, Any], *, dispatch: bool = True,
                  cfg: Config | None = None) -> Node:
        """A node joins: its engine runs tasks it claims (``dispatch``) and follows the others' events; ``cfg``: its
        own config (its own state folder …), else the cluster's."""
        cfg = cfg or self.cfg
        store = MemoryStore(self.clock, self.db)
        store.node = name
        queue = MemoryClaims(self.db, name, uuid.uuid4().hex[:8], LEASE)
        engine = Engine(cfg, store, self.clock, AgentFactory(cfg, self.clock, extra=dict(agents)), cluster=queue)
        role = engine.cluster
        assert role is not None
        node = Node(name, store, engine, queue)
        self.nodes[name] = node
        store.subscribe(self.publish)
        store.on_remote = role.on_remote
        self.db.claims.listeners.append(engine.dispatcher.wake)
        self.db.claims.heartbeat(name, queue.incarnation)

        async def run() -> None:
            with node.scope:
                async with anyio.create_task_group() as tg:
                    node.tg = tg
                    tg.start_soon(store.run_writer)
                    tg.start_soon(role.run)
                    if dispatch:
                        tg.start_soon(engine.run, tg)
                    await anyio.sleep_forever()
        self.tg.start_soon(run)
        await anyio.lowlevel.checkpoint()
        return node

    async def lead(self, name: str) -> None:
        """``name`` is elected: it loads and settles every open mission, then runs the leader's inbox and
        schedules (wake its ``engine.schedules`` after moving the clock)."""
        node = self.nodes[name]
        assert node.engine.cluster is not None
        role = node.engine.cluster
        self.db.leader = name  # the leader's row names it
        await role.lead(node.engine.load)
        assert node.tg is not None

        async def inbox() -> None:
            await node.engine.commands.run_inbox(0.01)
        role.start_term(node.tg, [inbox, node.engine.schedules.run])  # the leader's loops, as the daemon's

    def depose(self, name: str) -> None:
        """``name`` lost its lock (its connection dropped): it stops deciding at once; its turns go on."""
        self.lose_lock(name)
        node = self.nodes[name]
        assert node.engine.cluster is not None
        node.engine.cluster.abdicate()

    def lose_lock(self, name: str) -> None:
        """``name``'s lock is gone and it has not noticed yet: its next write is refused for the lock alone (as
        PostgreSQL's ``PLF02``)."""
        if self.db.leader == name:
            self.db.leader = None

    async def sweep(self, name: str) -> None:
        cluster = self.nodes[name].engine.cluster
        assert cluster is not None
        await cluster.sweep()

    def heartbeat(self) -> None:
        """Every live node renews its lease (the clock may have moved)."""
        for n in self.nodes.values():
            if n.alive:
                self.db.claims.heartbeat(n.name, n.queue.incarnation)

    def crash(self, name: str) -> None:
        """kill -9: nothing more of this node is written or read; its lease runs out."""
        node = self.nodes[name]
        node.alive = False
        node.store.lost = f"node {name} was killed (test)"  # the writer writes nothing more
        node.store.on_remote = None
        self.db.claims.listeners.remove(node.engine.dispatcher.wake)
        node.scope.cancel()
        self.clock.advance(LEASE + 1)
        self.heartbeat()

    async def accept(self, name: str, doc: dict[str, Any], source: str = "/missions/m.json") -> Mission:
        engine = self.nodes[name].engine
        raw = orjson.dumps(doc)
        loaded = load_mission(raw, known_agents=engine.agents.known_names())
        assert loaded.spec is not None, loaded.problems
        return await engine.admission.accept(spec=loaded.spec, source=source, digest=hashlib.sha256(raw).hexdigest(),
                                             warnings=[])


    def rows(self, table: str, **eq: Any) -> list[dict[str, Any]]:
        return [dict(r) for r in self.db.tables[table].values() if all(r.get(k) == v for k, v in eq.items())]


@asynccontextmanager
async def memory_cluster(cfg: Config) -> AsyncIterator[MemoryCluster]:
    clock = FakeClock()
    async with anyio.create_task_group() as tg:
        c = MemoryCluster(cfg, MemoryDatabase(clock), clock, tg)
        try:
            yield c
        finally:
            for n in c.nodes.values():
                if n.alive:
                    await n.engine.stop(1.0)
                    await n.store.flush()
            tg.cancel_scope.cancel()
