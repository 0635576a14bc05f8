"""The schedules table on every backend (memory, SQLite, PostgreSQL): a schedule's row and its firing's event
commit together, read back exactly, and a removed schedule is no longer read."""

from __future__ import annotations

from datetime import timedelta

import pytest

from polpo.events import catalog as E
from polpo.model.doc import MissionDoc
from polpo.model.schedule import Schedule, ScheduleStatus
from polpo.store import rows as R
from tests.support.stores import T0, Backend, spec, writing

pytestmark = pytest.mark.anyio


def schedule() -> Schedule:
    head = spec("report").model_copy(update={"schedule": "*/1 * * * *", "timezone": "Europe/Rome"})
    return Schedule(id="report", source="/missions/report.json", hash="h1", spec=MissionDoc.of(head).text(),
                    expr="*/1 * * * *", timezone="Europe/Rome", status=ScheduleStatus.ACTIVE, anchor=T0,
                    updated_at=T0)


async def test_a_schedule_round_trips_and_moves_with_its_firing(backend: Backend) -> None:
    store = await backend.open()
    s = schedule()
    async with writing(store):
        await store.commit(store.tx().schedule(s).event(E.ScheduleCreated(
            schedule_id="report", file=s.source, expression=s.expr, timezone="Europe/Rome", next_run_at=None),
            mission_id="report"))
        s.cursor, s.last_run, s.queued = T0 + timedelta(minutes=1), "report", 1
        await store.commit(store.tx().schedule(s).event(E.ScheduleTriggered(
            schedule_id="report", expression=s.expr, scheduled_for="2026-01-01T00:01:00.000Z", catch_up=False),
            mission_id="report"))
    store = await backend.open()
    try:
        (back,) = await store.schedules()
        assert R.schedule_row(back) == R.schedule_row(s)
        assert back.head().timezone == "Europe/Rome"
        assert [e.event for e in await store.events_after(0)] == ["schedule:created", "schedule:triggered"]
    finally:
        await store.close()


async def test_a_removed_schedule_is_not_read(backend: Backend) -> None:
    store = await backend.open()
    s = schedule()
    async with writing(store):
        await store.commit(store.tx().schedule(s))
        s.status = ScheduleStatus.REMOVED
        await store.commit(store.tx().schedule(s))
    store = await backend.open()
    try:
        assert await store.schedules() == []
    finally:
        await store.close()
