"""What an idle daemon's polls cost on SQLite: the command inbox (every 250 ms) and the questions' expiry (every
second) are read on the event loop's own connection (an index answers each with a few rows), not by a hop to
aiosqlite's thread: each hop woke two threads three times, 65 wake-ups a second with nothing to do
(scripts/bench_idle.py: 5.9 after). A command the CLI queues on its own connection is seen by the next poll."""

from __future__ import annotations

from pathlib import Path

import pytest

from polpo.clock import FakeClock
from polpo.store.protocol import CommandRecord
from polpo.store.sqlite import SqliteStore
from tests.support.stores import Backend, writing

pytestmark = pytest.mark.anyio

POLLS = 50


def switches(native_id: int) -> int:
    """Context switches of one thread of this process so far (each one a wake-up, or a preemption)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/self/task/{native_id}/status").read_text().splitlines())
    return int(fields["voluntary_ctxt_switches"]) + int(fields["nonvoluntary_ctxt_switches"])


async def test_the_polled_reads_see_the_clis_command_without_waking_the_readers_thread(tmp_path: Path) -> None:
    backend = Backend("sqlite", FakeClock(), db_path=tmp_path / "polpo.db")
    store = await backend.open()
    assert isinstance(store, SqliteStore)
    async with writing(store):
        worker = store.db._thread.native_id  # aiosqlite's thread: the reads that hop to it wake it
        assert worker is not None
        cid = await backend.queue_command("retry", "m:1")  # the CLI's own connection, as `polpo retry` does
        before = switches(worker)
        for _ in range(POLLS):
            assert await store.queued_commands() == [CommandRecord(cid, "retry", "m:1")]
            assert await store.due_questions("2026-01-01T00:00:00.000Z") == []
        woken = switches(worker) - before
    assert woken < POLLS // 5, f"aiosqlite's thread switched {woken} times for {2 * POLLS} polled reads"
