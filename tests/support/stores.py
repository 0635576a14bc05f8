"""Store backends for tests that must hold on every one (memory, SQLite, PostgreSQL), and record builders.

A test parametrized over ``BACKENDS`` takes the ``backend`` fixture (tests/conftest.py) and opens stores from
it; PostgreSQL's cluster is started only when a PostgreSQL case runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import anyio

from polpo.clock import FakeClock
from polpo.config import StoreSettings
from polpo.mission.schema import MissionSpec
from polpo.model.doc import MissionDoc
from polpo.model.records import Assessment, Attempt, Mission, Task
from polpo.model.status import AssessmentStatus, AttemptKind, AttemptStatus, MissionStatus, TaskStatus
from polpo.store import read
from polpo.store.core import StoreCore
from polpo.store.memory import MemoryStore
from polpo.store.sqlite import SqliteStore

BACKENDS = ["memory", "sqlite", "postgres"]


@dataclass
class Backend:
    """One backend's data, from which any number of store instances (nodes, restarts) can be opened."""

    kind: str
    clock: FakeClock
    db_path: Path | None = None  # sqlite
    url: str | None = None  # postgres
    _memory: MemoryStore | None = None

    async def open(self) -> StoreCore:
        if self.kind == "memory":
            if self._memory is None:
                self._memory = MemoryStore(self.clock)
            return self._memory
        if self.kind == "sqlite":
            assert self.db_path is not None
            return await SqliteStore.open(self.db_path, clock=self.clock)
        from polpo.store.postgres import PostgresStore

        return await PostgresStore.open(StoreSettings(url=self.url), clock=self.clock)

    def reader(self) -> read.Conn:
        """The CLI's connection to this backend's data (not for memory)."""
        if self.kind == "sqlite":
            assert self.db_path is not None
            return read.connect(self.db_path)
        assert self.kind == "postgres"
        from polpo.store.postgres_read import connect

        return connect(StoreSettings(url=self.url))

    async def queue_command(self, kind: str, target: str) -> int:
        """Queue a retry / cancel / approve the way the CLI does (its synchronous reader runs in a thread)."""
        if self.kind == "memory":
            assert self._memory is not None
            return self._memory.queue_command(kind, target)
        return await anyio.to_thread.run_sync(self._queue_command, kind, target)

    def _queue_command(self, kind: str, target: str) -> int:
        con = self.reader()
        try:
            return read.queue_command(con, kind, target, "2026-01-01T00:00:00.000Z")
        finally:
            con.close()


@asynccontextmanager
async def writing(store: StoreCore) -> AsyncIterator[StoreCore]:
    """The store with its writer running; closed (queue drained) on exit."""
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(store.run_writer)
            try:
                yield store
            finally:
                await store.flush()
                tg.cancel_scope.cancel()
    finally:
        await store.close()


# -- records ------------------------------------------------------------------------------------------------

T0 = datetime.fromisoformat("2026-01-01T00:00:00+00:00")


def spec(name: str = "m", n_tasks: int = 2) -> MissionSpec:
    return MissionSpec.model_validate({"name": name, "tasks": [
        {"title": f"t{i}", "description": "x", "assignTo": "shell"} for i in range(n_tasks)]})


def mission(mid: str = "m", seq: int = 1, status: MissionStatus = MissionStatus.RUNNING, name: str = "m") -> Mission:
    return Mission(id=mid, seq=seq, name=name, source=f"/missions/{mid}.json", hash="h" + mid, run=1,
                   doc=MissionDoc.of(spec(name)), workspace=Path("/ws") / mid, status=status, created_at=T0)


def task(m: Mission, idx: int, status: TaskStatus = TaskStatus.PENDING, **kw: object) -> Task:
    return Task(id=f"{m.id}:{idx + 1}", mission_id=m.id, idx=idx, title=m.spec.tasks[idx].title, agent="shell",
                doc=m.doc, status=status, updated_at=T0, **kw)  # type: ignore[arg-type]


def attempt(t: Task, number: int, prompt: str = "do it", status: AttemptStatus = AttemptStatus.RUNNING,
            **kw: object) -> Attempt:
    return Attempt(id=f"{t.id}/{number}", task_id=t.id, mission_id=t.mission_id, number=number,
                   kind=AttemptKind.INITIAL, agent="shell", status=status, started_at=T0, prompt=prompt,
                   **kw)  # type: ignore[arg-type]


def assessment(a: Attempt, n: int = 1, status: AssessmentStatus = AssessmentStatus.RUNNING) -> Assessment:
    return Assessment(id=f"{a.id}/as{n}", attempt_id=a.id, task_id=a.task_id, trigger=AttemptKind.INITIAL,
                      status=status, created_at=T0)


# -- the cluster's claim queue --------------------------------------------------------------------------------

def big_mission(n: int, mid: str = "m", home: str | None = None, limit: int | None = None, seq: int = 1) -> Mission:
    """A running mission of ``n`` pending tasks (``limit``: its max_concurrency; ``home``: its node)."""
    m = mission(mid, seq)
    m.spec = spec(mid, n)
    if limit is not None:
        m.spec = m.spec.model_copy(update={"settings": m.spec.settings.model_copy(update={"max_concurrency": limit})})
    m.home = home
    for i in range(n):
        t = task(m, i)
        m.tasks[t.id] = t
    return m


async def offered(store: StoreCore, m: Mission, *, agent: str = "shell", agent_limit: int | None = None) -> None:
    """The mission stored and each of its tasks offered to the cluster's queue, in one transaction."""
    from polpo.store.claim_writes import offer, offer_row

    tx = store.tx().mission(m)
    for t in m.tasks.values():
        offer(tx.task(t), offer_row(t, m, agent, agent_limit))
    await store.commit(tx)
