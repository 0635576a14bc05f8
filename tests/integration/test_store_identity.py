"""The store's identity on real databases: written once and read back, a new one for a new database, and a
database deleted, replaced or dropped under an open store stops its writer (nothing is written after)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from pathlib import Path

import anyio
import pytest

from polpo.clock import FakeClock
from polpo.config import StoreSettings
from polpo.events import catalog as E
from polpo.store.core import StoreCore
from polpo.store.identity import StoreLost
from polpo.store.protocol import StoreError
from polpo.store.schema import MIGRATIONS
from polpo.store.sqlite import SqliteStore
from tests.support.postgres import PgCluster

pytestmark = pytest.mark.anyio


def started() -> E.OrchestratorStarted:
    return E.OrchestratorStarted(version="t", pid=1, missions_dir="m", state_dir="s", agents=[], resumed_missions=0)


@asynccontextmanager
async def writing(store: StoreCore) -> AsyncIterator[None]:
    """The store with its writer running, closed on exit (without the final flush: it fails once lost)."""
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(store.run_writer)
            yield
            tg.cancel_scope.cancel()
    finally:
        await store.close()


def event_count(path: Path) -> int:
    with closing(sqlite3.connect(path)) as con:
        return int(con.execute("SELECT COUNT(*) FROM events").fetchone()[0])


async def test_a_sqlite_store_keeps_its_identity_and_a_new_file_gets_another(tmp_path: Path) -> None:
    first = await SqliteStore.open(tmp_path / "polpo.db", clock=FakeClock())
    await first.close()
    again = await SqliteStore.open(tmp_path / "polpo.db", clock=FakeClock())
    await again.close()
    other = await SqliteStore.open(tmp_path / "other.db", clock=FakeClock())
    await other.close()
    assert len(first.identity) == 36 and first.identity == again.identity != other.identity


async def test_a_database_from_before_identities_gets_one_at_its_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "polpo.db"
    with closing(sqlite3.connect(path)) as con:  # the schema as of v5, as an older polpo left it
        for step in MIGRATIONS[:5]:
            con.executescript(step)
        con.execute("PRAGMA user_version=5")
    store = await SqliteStore.open(path, clock=FakeClock())
    await store.close()
    again = await SqliteStore.open(path, clock=FakeClock())
    await again.close()
    assert store.identity and store.identity == again.identity


async def test_a_sqlite_file_deleted_under_the_store_gets_no_commit_after_and_its_data_is_rescued(
        tmp_path: Path) -> None:
    path = tmp_path / "polpo.db"
    store = await SqliteStore.open(path, clock=FakeClock())
    lost: list[str] = []
    store.on_lost = lost.append
    async with writing(store):
        await store.commit(store.tx().event(started()))
        for name in ("polpo.db", "polpo.db-wal", "polpo.db-shm"):
            (tmp_path / name).unlink(missing_ok=True)
        with pytest.raises(StoreError, match="was deleted while the daemon ran"):
            await store.commit(store.tx().event(started()))
        store.submit(store.tx().event(started()))  # queued work is dropped too, never written
    assert store.lost is not None and lost == [store.lost.split("; ")[0]]
    assert store.rescued is not None and store.rescued.name.startswith("polpo.db.rescued-")
    assert event_count(store.rescued) == 1  # only what was committed before the deletion
    assert str(store.rescued) in store.lost and "--archive-log" in store.lost


async def test_a_sqlite_file_replaced_under_the_store_is_noticed_by_the_timer(tmp_path: Path) -> None:
    path = tmp_path / "polpo.db"
    other = await SqliteStore.open(tmp_path / "other.db", clock=FakeClock())
    await other.close()
    store = await SqliteStore.open(path, clock=FakeClock())
    store.identity_every = 0.05
    lost: list[str] = []
    store.on_lost = lost.append
    async with writing(store):
        await store.commit(store.tx().event(started()))
        os.replace(tmp_path / "other.db", path)  # another store's database moved over the path
        with anyio.fail_after(20):
            await store.watch_identity()  # returns once it has seen it
        with pytest.raises(StoreLost):
            await store.commit(store.tx().event(started()))
    assert lost and "was replaced by another file" in lost[0]
    assert event_count(path) == 0  # the other store's file was not written to


async def _pg_identity(url: str) -> str:
    from polpo.store.postgres import PostgresStore

    store = await PostgresStore.open(StoreSettings(url=url), clock=FakeClock())
    await store.close()
    return store.identity


async def test_a_postgresql_store_keeps_its_identity_and_a_recreated_database_is_another(
        postgres_cluster: PgCluster) -> None:
    name = postgres_cluster.create_database("ident")
    url = postgres_cluster.url(name)
    try:
        first = await _pg_identity(url)
        assert first == await _pg_identity(url)
        postgres_cluster.drop_database(name)
        postgres_cluster.psql(f'CREATE DATABASE "{name}" TEMPLATE template0')
        assert await _pg_identity(url) not in ("", first)
    finally:
        postgres_cluster.drop_database(name)


@pytest.mark.parametrize("recreate", [True, False])
async def test_a_postgresql_database_dropped_under_the_store_stops_its_writer(
        postgres_cluster: PgCluster, recreate: bool) -> None:
    from polpo.store.postgres import PostgresStore

    name = postgres_cluster.create_database("ident")
    url = postgres_cluster.url(name)
    try:
        store = await PostgresStore.open(StoreSettings(url=url), clock=FakeClock())
        store.identity_every = 0.05
        lost: list[str] = []
        store.on_lost = lost.append
        async with writing(store):
            await store.commit(store.tx().event(started()))
            postgres_cluster.drop_database(name)
            if recreate:
                postgres_cluster.psql(f'CREATE DATABASE "{name}" TEMPLATE template0')
            with anyio.fail_after(20):
                await store.watch_identity()
            with pytest.raises(StoreLost):
                await store.commit(store.tx().event(started()))
        assert lost and f"the store PostgreSQL {store.target.where} was dropped" in lost[0]
    finally:
        postgres_cluster.drop_database(name)
