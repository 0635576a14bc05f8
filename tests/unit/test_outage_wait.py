"""How a component waits out the store being away (polpo.store.outage_wait): what counts as away is the store's
own say (``away``), and a wait backs off and is logged once, whatever the backend."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from polpo.clock import FakeClock
from polpo.store.errors import StoreUnavailable
from polpo.store.outage_wait import OUTAGE_CAP, OUTAGE_FIRST, OutageWait
from polpo.store.sqlite import SqliteStore


@pytest.mark.anyio
async def test_a_store_that_is_away_is_waited_out_with_a_growing_backoff_and_one_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """SQLite's StoreUnavailable is the store away by its own say (Store.away): a task's turn that meets it backs
    off as it does for PostgreSQL's outages, instead of trying every 0.5 s without end or a word."""
    log = logging.getLogger("polpo.test.outage")
    store = await SqliteStore.open(tmp_path / "polpo.db", clock=FakeClock())
    wait = OutageWait("task t1", log, away=store.away)
    await store.close()
    with caplog.at_level(logging.WARNING, logger=log.name):
        delays = [wait.failed(StoreUnavailable("the database file is locked")) for _ in range(8)]
    assert all(d is not None for d in delays)
    ds = [d for d in delays if d is not None]
    assert ds[0] <= OUTAGE_FIRST * 1.5 and max(ds) <= OUTAGE_CAP * 1.5 and max(ds) > ds[0]
    said = [r.getMessage().split(" (")[0] for r in caplog.records if r.name == log.name]
    assert said == ["task t1 waits for the database"], caplog.records
    assert wait.failed(ValueError("a bug")) is None  # not the store away: the caller's error, not waited out


def test_by_default_a_store_unavailable_and_postgresqls_outages_count_and_nothing_else() -> None:
    """SQLite's full disk or I/O error on a read (StoreUnavailable) is waited out by the command inbox, the timers
    and the schedules as PostgreSQL's outages are: it ended the daemon with a traceback until 2026-11."""
    wait = OutageWait("the schedules", logging.getLogger("polpo.test.outage"))
    assert wait.failed(StoreUnavailable("disk I/O error")) is not None
    assert wait.failed(ConnectionResetError(104, "Connection reset by peer")) is not None
    assert wait.failed(ValueError("a bug")) is None
