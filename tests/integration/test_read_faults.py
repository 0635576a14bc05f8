"""A SQLite read that meets a passing fault (no descriptor left, a full disk, an I/O error) says the store is away
(StoreUnavailable): the command inbox, the timers and the schedules wait it out and try again, where the raw
sqlite3 error used to end the daemon with a traceback (seen on a state disk that was full at start-up)."""

from __future__ import annotations

import logging
import os
import resource
from pathlib import Path

import pytest

from polpo.clock import FakeClock
from polpo.store.errors import StoreUnavailable
from polpo.store.outage_wait import OutageWait
from polpo.store.sqlite import SqliteStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_read_with_no_descriptor_left_says_the_store_is_away_and_the_next_read_works(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "polpo.db", clock=FakeClock())
    try:
        used = {int(n) for n in os.listdir("/proc/self/fd")}
        lowest_free = next(n for n in range(len(used) + 1) if n not in used)
        before = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, before[1]))  # no new descriptor at all
        try:
            with pytest.raises(StoreUnavailable) as raised:
                await store.queued_commands()  # its first quick read opens the loop's reading connection
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, before)
        assert "unable to open database file" in str(raised.value)
        assert store.away(raised.value)
        assert OutageWait("the command inbox", logging.getLogger("polpo.test")).failed(raised.value) is not None
        assert await store.queued_commands() == []  # descriptors again: the read goes through
    finally:
        await store.close()
