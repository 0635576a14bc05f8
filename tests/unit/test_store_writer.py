"""The store's writer: a faulty transaction is dropped alone; the others of its batch are written."""

from __future__ import annotations

import anyio
import pytest

from polpo.clock import FakeClock
from polpo.events.catalog import MissionCancelled
from polpo.store import rows as R
from polpo.store.memory import MemoryStore
from polpo.store.protocol import StoreError

pytestmark = pytest.mark.anyio


async def test_a_faulty_transaction_is_dropped_and_the_rest_of_its_batch_is_written() -> None:
    store = MemoryStore(FakeClock())
    good1 = store.tx().event(MissionCancelled(by="a"), mission_id="m1")
    bad = store.tx().event(MissionCancelled(by="b"), mission_id="m2")
    bad.ops.append((R.GATES, ("too", "short")))  # a bug: a row that does not fit its table
    good2 = store.tx().event(MissionCancelled(by="c"), mission_id="m3")
    for tx in (good1, bad, good2):
        store.submit(tx)  # queued together: one batch
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.run_writer)
        await good2.done.wait()
        await bad.done.wait()
        tg.cancel_scope.cancel()
    assert [e.mission_id for e in store.events] == ["m1", "m3"]
    assert [e.seq for e in store.events] == [1, 2]  # numbered without a gap where the dropped one was
    assert bad.error is not None and "2 values for 6 columns" in bad.error
    assert good1.error is None and good2.error is None


async def test_commit_raises_for_a_dropped_transaction() -> None:
    store = MemoryStore(FakeClock())
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.run_writer)
        bad = store.tx()
        bad.ops.append((R.GATES, ("x",)))
        with pytest.raises(StoreError):
            await store.commit(bad)
        await store.commit(store.tx().event(MissionCancelled(by="ok"), mission_id="m"))  # the writer goes on
        tg.cancel_scope.cancel()
    assert [e.data["by"] for e in store.events] == ["ok"]
