"""A record's columns declared once (polpo.store.columns): the table's names, record → row and row → record all
come from the one list, and they agree with the schema the migrations build."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from polpo.clock import FakeClock
from polpo.model.status import AttemptKind, TaskStatus
from polpo.store import rows as R
from polpo.store.columns import FLAG, JSON, TIME, TIME_OR_NONE, Col, Columns, enum
from polpo.store.sqlite import SqliteStore
from tests.support.stores import T0, mission, spec, task


def test_every_stored_field_of_a_task_survives_its_row() -> None:
    m = mission("m", 1)
    m.spec = spec("m", 2)
    t = task(m, 1, TaskStatus.REVIEW, reason="why", attempts=3, retries=1, fix_attempts=2, total_fixes=4,
             interruptions=1, next_kind=AttemptKind.FIX, feedback="do better", started_at=T0 + timedelta(seconds=1),
             finished_at=T0 + timedelta(seconds=2), score=4.5, escalation_level=2, model="big", judge_used=True,
             expectations=[{"type": "file_exists", "path": "a"}])
    row = R.task_row(t)
    assert len(row) == len(R.TASKS.cols)
    back = R.task_from_row(dict(zip(R.TASKS.cols, row, strict=True)), m)
    assert {c: getattr(back, c) for c in R.TASKS.cols} == {c: getattr(t, c) for c in R.TASKS.cols}
    assert back.doc is m.doc
    stored = dict(zip(R.TASKS.cols, row, strict=True))
    assert (stored["status"], stored["next_kind"], stored["judge_used"], stored["finished_at"], stored["expectations"],
            ) == ("review", "fix", 1, "2026-01-01T00:00:02.000Z", '[{"type":"file_exists","path":"a"}]')
    assert all(v is None or type(v) in (str, int, float) for v in row)  # what both databases store


@pytest.mark.anyio
async def test_the_declared_task_columns_are_the_tables_columns(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "polpo.db", clock=FakeClock(T0))
    await store.close()
    con = sqlite3.connect(tmp_path / "polpo.db")
    try:
        stored = {c[1] for c in con.execute("PRAGMA table_info(tasks)")}
    finally:
        con.close()
    assert set(R.TASKS.cols) == stored


@dataclass
class Thing:
    id: str
    kind: TaskStatus
    at: datetime
    maybe: datetime | None
    on: bool
    data: Any
    given: str = ""


def test_each_codec_stores_and_loads_its_value() -> None:
    cols = Columns("id", Col("kind", enum(TaskStatus)), Col("at", TIME), Col("maybe", TIME_OR_NONE), Col("on", FLAG),
                   Col("data", JSON))
    to_row, from_row = cols.to_row(), cols.from_row(Thing, "extra", given="extra")
    for maybe, data in ((None, None), (T0, {"a": [1]})):
        thing = Thing("x", TaskStatus.DONE, T0, maybe, True, data, "g")
        row = to_row(thing)
        assert row == ("x", "done", "2026-01-01T00:00:00.000Z", None if maybe is None else "2026-01-01T00:00:00.000Z",
                       1, None if data is None else '{"a":[1]}')
        assert from_row(dict(zip(cols.names, row, strict=True)), "g") == thing
