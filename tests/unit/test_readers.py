"""The reader pool on a real SQLite file: bounded however many callers wait, and it shrinks once they are gone.

Open connections are counted from this process's file descriptors on the write-ahead log (one per connection
that has read, closed with it), beside the pool's own count.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

import anyio
import pytest

from polpo.store.read import Conn, connect
from polpo.store.readers import ReaderPool

pytestmark = pytest.mark.anyio


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "polpo.db"
    con = sqlite3.connect(path)
    with con:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("CREATE TABLE t (x INTEGER)")
        con.execute("INSERT INTO t VALUES (1)")
    con.close()
    return path


def open_connections(db: Path) -> int:
    wal = str(db) + "-wal"
    count = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            count += os.readlink(fd) == wal
        except OSError:
            continue
    return count


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def burst(pool: ReaderPool, callers: int) -> int:
    """``callers`` reads at once, each a while in its thread; the most that ran together."""
    lock = threading.Lock()
    running = most = 0

    def read(con: Conn) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.002)
        value: int = con.execute("SELECT x FROM t").fetchone()[0]
        with lock:
            running -= 1
        return value

    results: list[int] = []

    async def one() -> None:
        results.append(await pool.run(read))

    async with anyio.create_task_group() as tg:
        for _ in range(callers):
            tg.start_soon(one)
    assert results == [1] * callers
    return most


async def test_many_callers_share_at_most_size_connections(db: Path) -> None:
    keeper = sqlite3.connect(db)  # a writer holds the file, as in the daemon
    pool = ReaderPool(lambda: connect(db, threads=True), size=3, floor=1, idle=60)
    try:
        assert await burst(pool, 100) <= 3
        assert pool.connections == 3 and open_connections(db) == 3
        await burst(pool, 100)  # the same ones again
        assert pool.connections == 3 and open_connections(db) == 3
    finally:
        await pool.close()
        keeper.close()
    assert pool.connections == 0 and open_connections(db) == 0


async def test_idle_connections_beyond_the_floor_close_after_the_idle_period(db: Path) -> None:
    clock = Clock()
    pool = ReaderPool(lambda: connect(db, threads=True), size=4, floor=1, idle=5, clock=clock)
    await burst(pool, 50)
    assert pool.connections == 4 and open_connections(db) == 4
    clock.now += 4
    await pool.trim()
    assert pool.connections == 4  # not idle long enough
    clock.now += 2
    await pool.trim()
    assert pool.connections == 1 and open_connections(db) == 1  # the floor stays warm
    clock.now += 60
    await pool.trim()
    assert pool.connections == 1
    await pool.close()
    assert open_connections(db) == 0


async def test_maintain_closes_them_without_further_calls(db: Path) -> None:
    pool = ReaderPool(lambda: connect(db, threads=True), size=4, floor=1, idle=0.05)
    async with anyio.create_task_group() as tg:
        tg.start_soon(pool.maintain)
        await burst(pool, 50)
        with anyio.fail_after(10):
            while open_connections(db) > 1:
                await anyio.sleep(0.02)
        assert pool.connections == 1
        tg.cancel_scope.cancel()
    await pool.close()


async def test_a_connection_whose_read_failed_is_closed(db: Path) -> None:
    pool = ReaderPool(lambda: connect(db, threads=True), size=2, floor=2, idle=60)

    def broken(con: Conn) -> None:
        con.execute("SELECT nope FROM t")

    with pytest.raises(sqlite3.OperationalError):
        await pool.run(broken)
    assert pool.connections == 0 and open_connections(db) == 0
    assert await pool.run(lambda con: con.execute("SELECT x FROM t").fetchone()[0]) == 1
    assert pool.connections == 1
    await pool.close()
