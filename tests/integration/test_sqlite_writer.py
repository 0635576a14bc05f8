"""The SQLite writer commits on the event loop without ever waiting there: a lock held by another process moves
the batch to a thread, and the WAL is checkpointed into the database file by the other connection."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import anyio
import pytest

from polpo.clock import FakeClock
from polpo.events import catalog as E
from polpo.store.sqlite import CHECKPOINT_EVERY, SqliteStore
from tests.support.stores import T0, mission, writing

pytestmark = pytest.mark.anyio


def _transition(n: int) -> E.TaskTransition:
    return E.TaskTransition(from_="pending", to="assigned", trigger=f"t{n}")


async def test_a_batch_waits_off_the_loop_for_a_lock_another_process_holds(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store = await SqliteStore.open(db, clock=FakeClock(T0))
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)  # a CLI queueing a command
    async with writing(store):
        await store.commit(store.tx().mission(mission()))
        other.execute("BEGIN IMMEDIATE")  # the write lock, held
        tx = store.submit(store.tx().event(_transition(1), mission_id="m"))
        await anyio.wait_all_tasks_blocked()  # the writer has tried and is waiting; the loop itself is free
        assert not tx.done.is_set()
        assert store.unavailable is None  # a held lock is not an outage
        other.execute("COMMIT")
        with anyio.fail_after(10):
            await tx.done.wait()
        assert tx.error is None
        await store.commit(store.tx().event(_transition(2), mission_id="m"))  # and the next batch is inline again
    rows = other.execute("SELECT seq, event FROM events ORDER BY seq").fetchall()
    other.close()
    assert rows == [(1, "task:transition"), (2, "task:transition")]


async def test_the_wal_reaches_the_database_file_every_few_hundred_commits(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store = await SqliteStore.open(db, clock=FakeClock(T0))
    async with writing(store):
        await store.commit(store.tx().mission(mission()))
        size_before = os.path.getsize(db)
        for n in range(CHECKPOINT_EVERY + 1):
            await store.commit(store.tx().event(_transition(n), mission_id="m", task_id="m:1"))
        # the writer never checkpoints itself (wal_autocheckpoint=0): the rows are in the file only if the
        # reading connection checkpointed
        assert os.path.getsize(db) > size_before
