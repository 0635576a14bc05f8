"""A PostgreSQL outage is a pause for the leader's own loops, not a loss: a finish another node recorded just as
the server went down is applied once it is back (its dependents are offered — before, the batch was dropped and
the mission stuck), and the command inbox waits for the server instead of ending the daemon.

Real parts: a private server stopped with ``pg_ctl stop -m fast`` and started again, a real engine on a real
:class:`PostgresStore` and :class:`ClaimQueue`.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import asyncpg
import pytest

from polpo.agents.registry import AgentFactory
from polpo.clock import FakeClock
from polpo.config import StoreSettings, load_config
from polpo.engine.engine import Engine
from polpo.events.catalog import Event
from polpo.store import read
from polpo.store.cluster.claims import ClaimQueue
from polpo.store.errors import StoreUnavailable
from polpo.store.identity import StoreLost
from polpo.store.postgres import PostgresStore
from polpo.store.postgres_faults import is_outage
from polpo.store.readers import ReaderPool
from tests.support.engine import EngineRun, ScriptAgent, config
from tests.support.pg_proxy import PgProxy
from tests.support.postgres import PgCluster, running_cluster

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[PgCluster]:
    """A server of these tests' own: they stop and start it, which the session's shared one must not see."""
    with running_cluster() as cluster:
        yield cluster


@asynccontextmanager
async def leader(url: str, root: Path, queue_pool: Any = None) -> AsyncIterator[tuple[EngineRun, PostgresStore]]:
    """A leading engine on PostgreSQL whose dispatcher does not run: tasks are run by "another node" (the test)."""
    clock = FakeClock()
    store = await PostgresStore.open(StoreSettings(url=url, pool_size=2), clock=clock)
    store.node = "L"
    cfg = config(root)
    agents = AgentFactory(cfg, clock, extra={"fake": ScriptAgent()})
    engine = Engine(cfg, store, clock, agents, cluster=ClaimQueue(queue_pool or store.pool, "L", "iL", 30))
    assert engine.cluster is not None
    engine.cluster.leader = True
    store.term = 1  # a leader decides in a term of its own (ClusterRole.lead): its decisions are written
    run = EngineRun(engine, store, clock, [])  # type: ignore[arg-type]
    store.subscribe(run.publish)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(store.run_writer)
            yield run, store
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await store.close()


async def _fetch(url: str, sql: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


async def _wait_rows(url: str, sql: str, *args: object, timeout: float = 30.0) -> list[asyncpg.Record]:
    with anyio.fail_after(timeout):
        while True:
            rows = await _fetch(url, sql, *args)
            if rows:
                return rows
            await anyio.sleep(0.1)


async def test_a_finish_followed_during_an_outage_offers_its_dependents_once_the_server_is_back(
        own_cluster: PgCluster, tmp_path: Path) -> None:
    url = own_cluster.url(own_cluster.create_database("follow"))
    doc = {"name": "m", "tasks": [{"title": "A", "assignTo": "fake", "description": "a"},
                                  {"title": "B", "assignTo": "fake", "description": "b", "dependsOn": ["A"]}]}
    async with leader(url, tmp_path) as (run, store):
        m = await run.accept(doc)
        await store.flush()
        a, b = (t.id for t in m.tasks.values())
        assert [r["task_id"] for r in await _fetch(url, "SELECT task_id FROM claims")] == [a]  # B waits for A
        # another node ran A and recorded it done; its event reaches the leader as the server goes down
        await _fetch(url, "UPDATE tasks SET status = 'done' WHERE id = $1", a)
        await _fetch(url, "DELETE FROM claims WHERE task_id = $1", a)
        finished = Event(10_000, "2026-01-01T00:00:00.000Z", "task:transition", m.id, a,
                         {"from": "review", "to": "done"}, node="W")
        own_cluster.stop_server("fast")
        role = run.engine.cluster
        assert role is not None
        async with anyio.create_task_group() as tg:
            tg.start_soon(role.run)
            role.on_remote([finished])
            await anyio.sleep(2.0)  # the leader reads A back: refused, again and again
            own_cluster.start_server()
            rows = await _wait_rows(url, "SELECT task_id, node FROM claims WHERE task_id = $1", b)
            tg.cancel_scope.cancel()
    assert [(r["task_id"], r["node"]) for r in rows] == [(b, None)]  # B offered, to any node


async def test_the_command_inbox_waits_for_the_server_and_then_answers(own_cluster: PgCluster,
                                                                         tmp_path: Path) -> None:
    url = own_cluster.url(own_cluster.create_database("inbox"))
    async with leader(url, tmp_path) as (run, _store):
        own_cluster.stop_server("fast")
        async with anyio.create_task_group() as tg:
            tg.start_soon(run.engine.commands.run_inbox)  # an exception here would end the task group (the daemon)
            await anyio.sleep(2.0)
            own_cluster.start_server()
            await _fetch(url, "INSERT INTO commands (kind, target, created_at) VALUES ('retry', 'nope:1', 'now')")
            rows = await _wait_rows(url, "SELECT status, result FROM commands WHERE status <> 'queued'")
            tg.cancel_scope.cancel()
    assert rows[0]["status"] == "refused" and "nope:1" in rows[0]["result"]


def _config_file(root: Path, url: str) -> Path:
    path = root / "polpo.toml"
    path.write_text(f'[daemon]\nmissions_dir = "{root / "m"}"\nstate_dir = "{root / "s"}"\n[store]\nurl = "{url}"\n')
    return path


async def test_reads_during_an_outage_say_so_in_one_line_and_a_read_open_across_a_restart_answers(
        own_cluster: PgCluster, tmp_path: Path) -> None:
    url = own_cluster.url(own_cluster.create_database("reads"))
    (await PostgresStore.open(StoreSettings(url=url), clock=FakeClock())).pool.terminate()  # the schema
    path = _config_file(tmp_path, url)
    cfg = load_config(path)
    readers = ReaderPool(lambda: read.open_reader(cfg, threads=True))
    await readers.run(read.ping)  # a pooled connection, which the restart closes under it
    own_cluster.stop_server("fast")
    try:
        with anyio.fail_after(60):
            status = await anyio.run_process([sys.executable, "-m", "polpo", "status", "--config", str(path)],
                                             check=False)
        stderr = status.stderr.decode()
        assert status.returncode == 1 and "Traceback" not in stderr, stderr
        assert len(stderr.strip().splitlines()) == 1, stderr
        assert "stopped, restarting or unreachable" in stderr
        with pytest.raises((StoreUnavailable, read.Unavailable), match="stopped, restarting or unreachable"):  # the API's 503
            await readers.run(read.ping)
    finally:
        own_cluster.start_server()
    await readers.run(read.ping)  # the dead connection was dropped; a new one answers
    await readers.close()


async def test_a_claim_whose_commit_answer_was_lost_is_given_back_and_its_task_runs(
        own_cluster: PgCluster, tmp_path: Path) -> None:
    url = own_cluster.url(own_cluster.create_database("lost"))
    proxy = PgProxy(own_cluster.port)
    await proxy.start()
    pool = await asyncpg.create_pool(url.replace(f":{own_cluster.port}/", f":{proxy.port}/") + "?sslmode=disable",
                                     min_size=1, max_size=2)
    try:
        async with leader(url, tmp_path, pool) as (run, _store):
            m = await run.accept({"name": "m", "settings": {"affinity": "any"},
                                  "tasks": [{"title": "A", "assignTo": "fake", "description": "a"}]})
            (a,) = m.tasks
            await _wait_rows(url, "SELECT task_id FROM claims WHERE node IS NULL")  # offered
            source = run.engine.dispatcher.source
            proxy.armed = "lose_answer"  # the claim commits; its answer is lost with the connection
            with pytest.raises(Exception) as err:
                await source.claim(1)
            assert proxy.fired == 1 and is_outage(err.value)
            held = await _wait_rows(url, "SELECT task_id FROM claims WHERE node = 'L'", timeout=15)  # (the server
            assert [r["task_id"] for r in held] == [a]  # may commit a moment after the client saw its connection go)
            turns = await source.claim(1)  # the claim nobody knew of goes back to the queue, and is claimed
            assert [t.task_id for t in turns] == [a]
    finally:
        await pool.close()
        await proxy.close()


async def test_a_leader_fenced_while_it_recovers_a_dead_nodes_task_leaves_quietly(
        own_cluster: PgCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Nemesis seed 14822: the leader took a dead node's claim over, then lost its own lease; the recovery's write
    was refused and logged as an error with a traceback. It is the end of this node's term: the sweep stops (the
    next leader takes the claim over as a dead node's), and nothing is logged as an error."""
    url = own_cluster.url(own_cluster.create_database("fencedsweep"))
    doc = {"name": "m", "tasks": [{"title": "A", "assignTo": "fake", "description": "a"}]}
    async with leader(url, tmp_path) as (run, store):
        m = await run.accept(doc)
        await store.flush()
        a = next(iter(m.tasks))
        await _fetch(url, "UPDATE claims SET node = 'b', incarnation = 'ib' WHERE task_id = $1", a)  # b is gone
        role = run.engine.cluster
        assert role is not None
        store.fence("node 'L' no longer holds its lease")
        with caplog.at_level(logging.WARNING), pytest.raises(StoreLost):
            await role.sweep()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and r.name != "polpo.store"] == []
    assert a not in role.own
