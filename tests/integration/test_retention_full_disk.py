"""Retention on a state disk that fills up: a pass that meets the full disk says so in one line and the next pass,
once there is room, removes what is due (its connection is opened again; it is not left broken)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import anyio
import pytest

from polpo.clock import FakeClock
from polpo.config import load_config
from polpo.retention.pruner import Pruner, run_once
from polpo.store.errors import StoreUnavailable
from polpo.store.sqlite import SqliteStore
from tests.integration.test_retention_store import CUT, finished
from tests.support.daemon import write_config
from tests.support.mounts import Mounts, mounts
from tests.support.stores import T0, writing

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def mnt(tmp_path: Path) -> Iterator[Mounts]:
    with mounts(tmp_path) as m:
        yield m


async def test_a_removal_on_a_full_disk_is_a_passing_fault_and_the_next_one_works(tmp_path: Path, mnt: Mounts,
                                                                                 caplog: pytest.LogCaptureFixture) -> None:
    cfg = load_config(write_config(tmp_path, extra='[retention]\nfinished = "P1D"\ninterval = 0.1\n'))
    mnt.tmpfs(cfg.state_dir, size_kb=16384, inodes=64)
    clock = FakeClock(T0 + timedelta(days=30))
    store = await SqliteStore.open(cfg.db_path, clock=clock)
    async with writing(store):
        for i in range(20):
            await store.commit(finished(f"m{i}", i + 1))
        assert sorted(await store.prune_candidates(CUT, 100, False)) == sorted(f"m{i}" for i in range(20))
        filler = mnt.fill(cfg.state_dir)  # every block and inode: the removal's WAL pages have nowhere to go
        with pytest.raises(StoreUnavailable):  # (was sqlite3.OperationalError, which a store's caller cannot tell
            for i in range(20):  # from a bug; a small removal may still fit in pages the WAL already has)
                await store.prune_missions([f"m{i}"], CUT)
        with caplog.at_level(logging.WARNING, logger="polpo.retention"), anyio.move_on_after(0.5):
            await Pruner(cfg, store, clock).run()  # passes every 0.1 s, each meeting the full disk
        said = [r for r in caplog.records if r.name.startswith("polpo.retention")]
        assert said and all(r.levelno == logging.WARNING and r.exc_info is None for r in said)
        assert "the store cannot be written now" in said[0].getMessage()
        mnt.free(filler)
        assert await run_once(cfg, store, clock) > 0  # a connection that works: everything due goes
        assert await store.prune_candidates(CUT, 100, False) == []
