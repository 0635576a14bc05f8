"""The private PostgreSQL cluster the store tests run on: reachable, isolated per test, and able to do what
the PostgreSQL store relies on (SKIP LOCKED claims, LISTEN/NOTIFY wake-ups), and removed even when killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import asyncpg
import pytest

from tests.support.postgres import PgCluster

pytestmark = pytest.mark.anyio

QUEUE = "CREATE TABLE queue (id bigserial PRIMARY KEY, status text NOT NULL, owner text)"
CLAIM = (
    "UPDATE queue SET status = 'running', owner = $1 "
    "WHERE id = (SELECT id FROM queue WHERE status = 'ready' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) "
    "RETURNING id"
)


@asynccontextmanager
async def connect(url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(url)
    try:
        yield conn
    finally:
        await conn.close()


async def test_each_test_gets_its_own_empty_database_on_an_unprivileged_server(
    postgres_url: str, postgres_cluster: PgCluster
) -> None:
    async with connect(postgres_url) as conn:
        row = await conn.fetchrow(
            "SELECT current_database() AS db, current_setting('server_version_num')::int AS version, "
            "(SELECT count(*) FROM pg_tables WHERE schemaname = 'public') AS tables"
        )
    assert row is not None
    assert postgres_url.endswith(f"/{row['db']}") and row["db"] != "postgres"
    assert row["version"] >= 150000
    assert row["tables"] == 0
    if os.geteuid() == 0:  # initdb refuses root: the data folder belongs to the unprivileged server user
        assert postgres_cluster.datadir.stat().st_uid != 0


async def test_skip_locked_hands_a_locked_row_to_no_one_else(postgres_url: str) -> None:
    async with connect(postgres_url) as a, connect(postgres_url) as b:
        await a.execute(QUEUE)
        await a.execute("INSERT INTO queue (status) SELECT 'ready' FROM generate_series(1, 3)")
        async with a.transaction():  # a claims row 1 and keeps it locked, uncommitted
            first = await a.fetchval(CLAIM, "a")
            second = await b.fetchval(CLAIM, "b")  # not blocked by a's lock: skips the row
            assert (first, second) == (1, 2)
        rows = await b.fetch("SELECT id, status, owner FROM queue ORDER BY id")
    assert [tuple(r) for r in rows] == [(1, "running", "a"), (2, "running", "b"), (3, "ready", None)]


async def test_concurrent_claimers_split_the_queue_without_overlap(postgres_url: str) -> None:
    n = 300
    async with connect(postgres_url) as setup:
        await setup.execute(QUEUE)
        await setup.execute("INSERT INTO queue (status) SELECT 'ready' FROM generate_series(1, $1::int)", n)
    claimed: dict[str, list[int]] = {"a": [], "b": []}

    async def drain(owner: str) -> None:
        async with connect(postgres_url) as conn:
            while (row_id := await conn.fetchval(CLAIM, owner)) is not None:
                claimed[owner].append(row_id)  # each await on the socket lets the other claimer in

    async with anyio.create_task_group() as tg:
        tg.start_soon(drain, "a")
        tg.start_soon(drain, "b")
    assert not set(claimed["a"]) & set(claimed["b"])
    assert sorted(claimed["a"] + claimed["b"]) == list(range(1, n + 1))


async def test_notify_wakes_a_listener_on_another_connection_only_on_commit(postgres_url: str) -> None:
    send, receive = anyio.create_memory_object_stream[tuple[int, str, str]](10)
    async with connect(postgres_url) as listener, connect(postgres_url) as sender:
        await listener.add_listener("wake", lambda _c, pid, channel, payload: send.send_nowait((pid, channel, payload)))
        with pytest.raises(asyncpg.exceptions.RaiseError):
            async with sender.transaction():
                await sender.execute("SELECT pg_notify('wake', 'rolled back')")
                await sender.execute("DO $$ BEGIN RAISE 'abort'; END $$")
        await sender.execute("SELECT pg_notify('wake', 'task 7 ready')")
        with anyio.fail_after(30):
            got = await receive.receive()
        assert got == (sender.get_server_pid(), "wake", "task 7 ready")


def test_cluster_is_stopped_and_removed_when_its_owner_is_killed() -> None:
    script = Path(__file__).resolve().parents[1] / "support" / "postgres.py"
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    url = owner.stdout.readline().strip()
    folder = Path(owner.stdout.readline().removeprefix("folder: ").strip())
    pid = int((folder / "data" / "postmaster.pid").read_text().split()[0])
    assert url.startswith("postgresql://") and folder.is_dir() and _alive(pid)
    owner.send_signal(signal.SIGKILL)  # no finaliser runs: only the watchdog can clean up
    owner.wait()
    deadline = time.monotonic() + 60
    while (folder.exists() or _alive(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not folder.exists()
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    """True while the process exists and is not a zombie (the postmaster is not our child to reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
