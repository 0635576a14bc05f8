"""What only the PostgreSQL store has to show: one event sequence shared by several store instances, migrations
that two nodes can start at once, a schema that mirrors SQLite's, text PostgreSQL cannot hold, and a password
that never reaches an error message."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

import anyio
import asyncpg
import pytest

from polpo.clock import FakeClock
from polpo.config import StoreSettings, parse_config
from polpo.events import catalog as E
from polpo.events.catalog import Event
from polpo.model.status import GateStatus, MissionStatus, TaskStatus
from polpo.store import mission_list, read
from polpo.store.postgres import PostgresStore
from polpo.store.postgres_schema import MIGRATIONS, SCHEMA_VERSION, migrate
from polpo.store.protocol import StoreError
from polpo.store.schema import SCHEMA_VERSION as SQLITE_VERSION
from polpo.store.sqlite import SqliteStore
from tests.support.postgres import PgCluster
from tests.support.stores import Backend, attempt, mission, task, writing

pytestmark = pytest.mark.anyio


async def open_pg(url: str, **settings: Any) -> PostgresStore:
    return await PostgresStore.open(StoreSettings(url=url, **settings), clock=FakeClock())


async def test_two_stores_on_one_database_share_one_sequence_of_distinct_increasing_seqs(postgres_url: str) -> None:
    a, b = await open_pg(postgres_url), await open_pg(postgres_url)
    seen: dict[str, list[Event]] = {"a": [], "b": []}
    a.subscribe(seen["a"].append)
    b.subscribe(seen["b"].append)

    async def produce(store: PostgresStore, name: str) -> None:
        for i in range(40):
            await store.commit(store.tx().event(E.TaskTransition(from_="x", to=f"{name}{i}", trigger="t"))
                               .event(E.TaskTransition(from_="y", to=f"{name}{i}", trigger="t")))

    async with writing(a), writing(b), anyio.create_task_group() as tg:
        tg.start_soon(produce, a, "a")
        tg.start_soon(produce, b, "b")
    seqs_a, seqs_b = [e.seq for e in seen["a"]], [e.seq for e in seen["b"]]
    assert len(seqs_a) == len(seqs_b) == 80
    assert seqs_a == sorted(seqs_a) and seqs_b == sorted(seqs_b)  # each node publishes in commit order
    assert not set(seqs_a) & set(seqs_b)  # one sequence for the cluster
    assert min(seqs_b) < max(seqs_a) and min(seqs_a) < max(seqs_b)  # the two really interleaved
    reader = await open_pg(postgres_url)
    try:
        stored = await reader.events_after(0)
    finally:
        await reader.close()
    assert stored == sorted(seen["a"] + seen["b"], key=lambda e: e.seq)
    assert [e.seq for e in stored] == list(range(1, 161))  # no gaps across the two


async def test_a_node_numbers_its_events_only_after_an_earlier_numbered_commit_is_done(postgres_url: str) -> None:
    """So a reader following ``seq`` upwards never sees a smaller number appear later."""
    store = await open_pg(postgres_url)
    other = await asyncpg.connect(postgres_url)  # another node, between numbering its events and committing
    watcher = await asyncpg.connect(postgres_url)
    try:
        async with writing(store):
            tx = other.transaction()
            await tx.start()
            assert await other.fetchval("UPDATE event_clock SET seq = seq + 1 RETURNING seq") == 1
            mine = store.submit(store.tx().event(E.OrchestratorShutdown(pid=1, unfinished_missions=0)))
            with anyio.fail_after(60):
                # Polled from a connection outside any transaction: inside one, pg_stat_activity is a
                # snapshot taken at its first read and would never show the writer starting to wait.
                while not await watcher.fetchval(  # our writer waits on the clock's row lock
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                        "AND wait_event_type = 'Lock' AND query LIKE 'UPDATE event_clock%'"):
                    await anyio.sleep(0.01)
            assert not mine.done.is_set()
            await other.execute("INSERT INTO events (seq, ts, event, data) VALUES (1, 't', 'other', '{}')")
            await tx.commit()
            await mine.done.wait()
        assert [e.seq for e in mine.events] == [2]
    finally:
        await other.close()
        await watcher.close()


async def test_nodes_starting_together_migrate_once(postgres_url: str) -> None:
    stores: list[PostgresStore] = []

    async def start() -> None:
        stores.append(await open_pg(postgres_url))

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(start)
    for s in stores:
        await s.close()
    conn = await asyncpg.connect(postgres_url)
    try:
        versions = [r[0] for r in await conn.fetch("SELECT version FROM schema_version ORDER BY version")]
    finally:
        await conn.close()
    assert len(stores) == 4
    assert versions == list(range(1, SCHEMA_VERSION + 1))


async def test_migrations_apply_only_what_is_missing_all_or_nothing(postgres_url: str) -> None:
    v2 = "CREATE TABLE extra (id INTEGER); ALTER TABLE tasks ADD COLUMN later TEXT"
    broken = "CREATE TABLE half (id INTEGER); SELECT no_such_function()"
    conn = await asyncpg.connect(postgres_url)
    try:
        assert await migrate(conn) == SCHEMA_VERSION
        assert await migrate(conn, [*MIGRATIONS, v2]) == SCHEMA_VERSION + 1
        assert await conn.fetchval("SELECT to_regclass('extra') IS NOT NULL")
        with pytest.raises(asyncpg.UndefinedFunctionError):
            await migrate(conn, [*MIGRATIONS, v2, broken])
        assert await conn.fetchval("SELECT to_regclass('half')") is None  # rolled back with its version row
        assert await conn.fetchval("SELECT MAX(version) FROM schema_version") == SCHEMA_VERSION + 1
    finally:
        await conn.close()
    with pytest.raises(StoreError, match="newer than this polpo"):
        await open_pg(postgres_url)


async def test_the_schema_mirrors_sqlite_column_for_column(postgres_url: str, tmp_path: Path) -> None:
    sqlite_store = await SqliteStore.open(tmp_path / "polpo.db", clock=FakeClock())
    await sqlite_store.close()
    assert SQLITE_VERSION >= 1
    con = sqlite3.connect(tmp_path / "polpo.db")
    kinds = {"INTEGER": "bigint", "REAL": "double precision", "TEXT": "text"}
    lite: dict[str, list[tuple[str, str, bool]]] = {}
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"):
        lite[name] = [(c[1], kinds[c[2]], bool(c[3]) or bool(c[5])) for c in con.execute(f"PRAGMA table_info({name})")]
    con.close()
    (await open_pg(postgres_url)).pool.terminate()
    conn = await asyncpg.connect(postgres_url)
    try:
        rows = await conn.fetch(
            "SELECT table_name, column_name, data_type, is_nullable = 'NO' AS not_null, collation_name "
            "FROM information_schema.columns WHERE table_schema = 'public' "
            "AND table_name NOT IN ('schema_version', 'event_clock', 'nodes', 'claims', 'leader') "
            "ORDER BY table_name, ordinal_position")
    finally:
        await conn.close()
    pg: dict[str, list[tuple[str, str, bool]]] = {}
    for r in rows:
        pg.setdefault(r["table_name"], []).append((r["column_name"], r["data_type"], r["not_null"]))
        assert r["collation_name"] in (None, "C")  # text sorts bytewise, as in SQLite
    assert pg == lite


async def test_text_postgresql_cannot_hold_is_stored_with_a_replacement_character(postgres_url: str) -> None:
    store = await open_pg(postgres_url)
    m = mission()
    t = task(m, 0)
    async with writing(store):
        await store.commit(store.tx().mission(m).task(t).attempt(attempt(t, 1, stdout_tail="a\x00b")))
        loaded = await store.load_mission("m")
    assert loaded is not None and loaded.attempts[t.id].stdout_tail == "a\ufffdb"


async def test_a_wrong_password_is_refused_without_showing_it(
    postgres_url: str, postgres_cluster: PgCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = postgres_cluster.password_role("polpo_pw", "right-Pa55word", postgres_url.rsplit("/", 1)[1])
    monkeypatch.setenv("POLPO_TEST_PG_PASSWORD", "wr0ng-Pa55word-xyz")
    with pytest.raises(StoreError) as err:
        await open_pg(url, password_env="POLPO_TEST_PG_PASSWORD")
    message = str(err.value)
    assert "password authentication failed" in message and "polpo_pw@127.0.0.1" in message
    printed = "".join(traceback.format_exception(err.value))  # what a crash would print
    assert "wr0ng-Pa55word-xyz" not in printed and "InvalidPasswordError" not in printed
    monkeypatch.setenv("POLPO_TEST_PG_PASSWORD", "right-Pa55word")
    store = await open_pg(url, password_env="POLPO_TEST_PG_PASSWORD")
    try:
        assert await store.last_mission_seq() == 0
    finally:
        await store.close()
    monkeypatch.delenv("POLPO_TEST_PG_PASSWORD")
    with pytest.raises(StoreError, match="POLPO_TEST_PG_PASSWORD, which is not set"):
        await open_pg(url, password_env="POLPO_TEST_PG_PASSWORD")


def test_the_cli_reader_refuses_a_wrong_password_without_showing_it(
    postgres_url: str, postgres_cluster: PgCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = postgres_cluster.password_role("polpo_pw", "right-Pa55word", postgres_url.rsplit("/", 1)[1])
    monkeypatch.setenv("POLPO_TEST_PG_PASSWORD", "wr0ng-Pa55word-xyz")
    cfg = parse_config({"store": {"url": url, "password_env": "POLPO_TEST_PG_PASSWORD"}}, tmp_path / "polpo.toml")
    with pytest.raises(read.Unreachable) as err:
        read.open_reader(cfg)
    assert "password authentication failed" in str(err.value) and "wr0ng-Pa55word-xyz" not in str(err.value)


async def test_the_cli_reads_the_same_from_postgresql_as_from_sqlite(postgres_url: str, tmp_path: Path) -> None:
    """read.py's queries, through the PostgreSQL adapter, give exactly what they give on SQLite."""
    backends = [Backend("sqlite", FakeClock(), db_path=tmp_path / "polpo.db"),
                Backend("postgres", FakeClock(), url=postgres_url)]
    m = mission(status=MissionStatus.COMPLETED)
    m.report, m.warnings = {"summary": "ok", "attempts": 2}, ["w1"]
    t0, t1 = task(m, 0, TaskStatus.DONE, score=4.0, expectations=[{"type": "x"}]), task(m, 1)
    a = attempt(t0, 1, files={"created": ["a.txt"]}, outcomes=[{"path": "a"}], duration=1.25, exit_code=0)
    for b in backends:
        store = await b.open()
        async with writing(store):
            await store.commit(store.tx().mission(m).task(t0).task(t1).attempt(a)
                               .transcript(a.id, t0.id, '[{"role": "user", "content": "hi"}]')
                               .review(f"{a.id}/as1", 0, 1, t0.id, "m", True, '{"globalScore": 4.0}', a.started_at)
                               .dimensions(t0.id, 0, "given", '[{"name": "q", "weight": 1}]', a.started_at)
                               .gate(m.id, "g", GateStatus.PASSED, "fine", 4.0, a.started_at))
        await anyio.to_thread.run_sync(b._queue_command, "retry", t0.id)

    def snapshot(b: Backend) -> dict[str, Any]:
        con = b.reader()
        try:
            return {"missions": mission_list.missions(con), "mission": read.mission(con, "m"),
                    "by_name": read.mission(con, m.name), "tasks": read.tasks(con, "m"),
                    "task": read.task(con, t0.id), "attempts": read.attempts(con, t0.id, full=True),
                    "brief": read.attempts(con, t0.id), "transcript": read.transcript(con, a.id),
                    "dimensions": read.dimensions(con, t0.id), "gates": read.gates(con, "m"),
                    "command": read.command(con, 1)}
        finally:
            con.close()

    lite, pg = [await anyio.to_thread.run_sync(snapshot, b) for b in backends]
    assert pg == lite
    assert pg["missions"][0]["total"] == 2 and pg["command"]["kind"] == "retry"


def test_a_sqlite_config_never_imports_asyncpg(tmp_path: Path) -> None:
    code = ("import sys, anyio; from polpo.clock import SystemClock; from polpo.config import parse_config; "
            "from pathlib import Path; from polpo.store.open import open_store; "
            f"cfg = parse_config({{}}, Path({str(tmp_path / 'polpo.toml')!r})); "
            "s = anyio.run(open_store, cfg, SystemClock()); anyio.run(s.close); "
            "assert 'asyncpg' not in sys.modules, 'asyncpg imported'; print(type(s).__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "SqliteStore"


def test_the_cli_on_a_database_no_daemon_has_used_says_there_is_no_state_yet(
    postgres_url: str, tmp_path: Path
) -> None:
    cfg = parse_config({"store": {"url": postgres_url}}, tmp_path / "polpo.toml")
    with pytest.raises(read.NoState, match="no polpo state in the PostgreSQL database") as err:
        read.open_reader(cfg)
    assert not isinstance(err.value, read.Unreachable)
