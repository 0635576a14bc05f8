"""A checkpoint's and a delay's stored state reads back as written, in every backend (memory, SQLite,
PostgreSQL): what a restart or another node finds."""

from __future__ import annotations

from datetime import timedelta

import pytest

from polpo.model.holds import HoldKind, HoldState, HoldStatus
from tests.support.stores import T0, Backend, mission, task, writing

pytestmark = pytest.mark.anyio


async def test_holds_read_back_with_their_expiry_and_who_resumed(backend: Backend) -> None:
    store = await backend.open()
    m = mission()
    reached = HoldState(HoldKind.CHECKPOINT, "go-live", HoldStatus.REACHED, T0)
    delay = HoldState(HoldKind.DELAY, "go-live", HoldStatus.STARTED, T0, expires_at=T0 + timedelta(hours=2))
    async with writing(store):
        await store.commit(store.tx().mission(m).task(task(m, 0)).hold(m.id, reached).hold(m.id, delay))
        reached.status, reached.released_at, reached.by, reached.note = HoldStatus.RELEASED, T0, "ada", "ok"
        await store.commit(store.tx().hold(m.id, reached))
    if backend.kind != "memory":
        await store.close()
        store = await backend.open()
    try:
        loaded = await store.load_mission(m.id)
    finally:
        if backend.kind != "memory":
            await store.close()
    assert loaded is not None
    assert loaded.mission.holds == {(HoldKind.CHECKPOINT, "go-live"): reached, (HoldKind.DELAY, "go-live"): delay}
