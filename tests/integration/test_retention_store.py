"""Retention's removals, held by every backend (memory, SQLite, PostgreSQL): a mission's rows in every table go in
one transaction, only while it is still finished; labelled, open and young missions stay; events of no kept
mission go by age a window at a time, never the newest; a file's record goes only when no mission or schedule
needs it; SQLite gives the pages back (issue 31)."""

from __future__ import annotations

import os
import sqlite3
from datetime import timedelta
from typing import Any

import anyio
import pytest

from polpo.checks.base import CheckOutcome
from polpo.clock import iso
from polpo.events import catalog as E
from polpo.model.schedule import Schedule, ScheduleStatus
from polpo.model.status import (
    AssessmentStatus,
    AttemptStatus,
    GateStatus,
    MissionStatus,
    SourceOutcome,
    TaskStatus,
)
from polpo.store import rows as R
from polpo.store.core import StoreCore
from polpo.store.prune import RELATIONS, export_statements, mission_of, removal_statements
from polpo.store.spend_writes import add
from polpo.store.tx import Tx
from tests.support.stores import T0, Backend, assessment, attempt, mission, task, writing

pytestmark = pytest.mark.anyio

LATER = T0 + timedelta(days=30)
CUT = iso(T0 + timedelta(days=10))  # what finished before it goes


def finished(mid: str, seq: int, at: Any = T0, status: MissionStatus = MissionStatus.COMPLETED,
             source: str | None = None) -> Tx:
    """A mission that ran two tasks, with a row in every table a mission writes, finished at ``at``."""
    m = mission(mid, seq)
    if source is not None:
        m.source = source
    tx = Tx().mission(m).source(R.SourceRecord(m.source, "h" + mid, SourceOutcome.ACCEPTED, mid, 1), at)
    for i in range(2):
        t = task(m, i, TaskStatus.DONE)
        a = attempt(t, 1, status=AttemptStatus.FINISHED)
        asm = assessment(a, 1, AssessmentStatus.COMPLETE)
        tx.task(t).attempt(a).assessment(asm).transcript(a.id, t.id, "[]")
        tx.check(asm.id, t.id, CheckOutcome(type="file_exists", label="x", passed=True, message="ok", index=0), at)
        tx.review(asm.id, 0, 0, t.id, "judge/m", True, "{}", at).dimensions(t.id, 0, "default", "[]", at)
        tx.sla_mark(t.id, "met", "task", mid, "{}", at)
        add(tx, ("task", t.id, "", mid, 1, 1, 0.01, 1, 1, 0, None, None, iso(at)))
        tx.event(E.TaskTransition(from_="review", to="done", trigger="passed"), mission_id=mid, task_id=t.id)
    tx.gate(mid, "g", GateStatus.PASSED, None, None, at)
    add(tx, ("mission", mid, "", mid, 2, 2, 0.02, 1, 2, 0, None, None, iso(at)))
    m.status, m.finished_at = status, at
    return tx.mission(m).event(E.MissionCompleted(outcome=status.value, all_passed=True, report={}), mission_id=mid)


async def rows_of(store: StoreCore, backend: Backend, table: str) -> list[dict[str, Any]]:
    """Every row of ``table`` as the backend keeps it (the CLI's reader, in a thread: it runs a loop of its own)."""
    if backend.kind == "memory":
        from polpo.store.memory import MemoryStore

        assert isinstance(store, MemoryStore)
        if table == "events":
            return [{"seq": e.seq, "mission_id": e.mission_id, "event": e.event} for e in store.events]
        return store.rows(table)

    def read() -> list[dict[str, Any]]:
        con = backend.reader()
        try:
            return [dict(r) for r in con.execute(f"SELECT * FROM {table}")]
        finally:
            con.close()
    return await anyio.to_thread.run_sync(read)


async def missions_in(store: StoreCore, backend: Backend, table: str) -> set[str]:
    if table == "missions":
        return {r["id"] for r in await rows_of(store, backend, table)}
    return {m for r in await rows_of(store, backend, table) if (m := mission_of(table, r)) is not None}


async def test_a_finished_mission_goes_whole_and_what_must_stay_stays(backend: Backend) -> None:
    store = await backend.open()
    async with writing(store):
        await store.commit(finished("old", 1).event(E.OrchestratorStarted(
            version="x", pid=1, missions_dir="/m", state_dir="/s", agents=[], resumed_missions=0)))
        await store.commit(finished("labelled", 2).override(
            ("labelled:1", "labelled", 1, 4.0, 0, 2.0, "labelled:1/1", "right after all", "ann", iso(T0))))
        await store.commit(finished("young", 3, at=LATER))
        await store.commit(finished("reopened", 4))
        running = mission("running", 5)
        await store.commit(Tx().mission(running).task(task(running, 0)))
        # what is gone is exported first: every row of the mission, by table
        exported = await store.export_missions(["old"])
        assert {t: len(r) for t, r in exported["old"].items()} == {
            "missions": 1, "tasks": 2, "attempts": 2, "spend": 3, "sla_marks": 2, "gates": 1, "events": 3,
            "assessments": 2, "dimensions": 2, "reviews": 2, "transcripts": 2, "checks": 2}

        assert sorted(await store.prune_candidates(CUT, 10, True)) == ["old", "reopened"]
        assert sorted(await store.prune_candidates(CUT, 10, False)) == ["labelled", "old", "reopened"]
        # a person's retry opened "reopened" between the read and the removal: it stays, whole
        m = mission("reopened", 4)
        await store.commit(Tx().mission(m))
        pruned = await store.prune_missions(["old", "reopened", "young"], CUT)
        assert [p.id for p in pruned] == ["old"] and pruned[0].source == "/missions/old.json"
        for table in ("missions", *(t for t, _, _ in RELATIONS)):
            assert "old" not in await missions_in(store, backend, table), table
        assert await missions_in(store, backend, "tasks") == {"labelled", "young", "reopened", "running"}
        assert await missions_in(store, backend, "checks") == {"labelled", "young", "reopened"}
        assert await missions_in(store, backend, "overrides") == {"labelled"}
        # the file's record outlives the mission: its run count goes on (the intake's de-duplication needs it)
        assert (await store.source("/missions/old.json")) is not None
        assert await store.prune_sources(["/missions/old.json", "/missions/young.json"]) == 1  # young still needs its
        assert await store.source("/missions/old.json") is None


async def test_a_schedule_keeps_its_newest_runs_and_lets_older_finished_ones_go(backend: Backend) -> None:
    store = await backend.open()
    src = "/missions/report.json"
    async with writing(store):
        for i in range(1, 6):
            await store.commit(finished(f"report#{i}", i, source=src))
        live = mission("report#6", 6)
        live.source = src
        await store.commit(Tx().mission(live))
        await store.commit(Tx().schedule(Schedule(id="report", source=src, hash="h", spec="{}", expr="* * * * *",
                                                  timezone=None, status=ScheduleStatus.ACTIVE, anchor=T0,
                                                  updated_at=T0)))
        beyond = await store.schedule_runs_beyond(src, 3, 10, True)
        assert beyond == ["report#1", "report#2", "report#3"]  # the newest 3 (report#4, #5, #6) stay
        assert await store.schedule_runs_beyond(src, 3, 2, True) == ["report#1", "report#2"]
        assert await store.schedule_runs_beyond(src, 10, 10, True) == []
        assert sorted(p.id for p in await store.prune_missions(beyond, "9999")) == beyond
        assert await store.prune_sources([src]) == 0  # its schedule and its runs need the record


async def test_events_of_no_kept_mission_go_by_age_a_window_at_a_time_but_never_the_newest(backend: Backend) -> None:
    store = await backend.open()
    async with writing(store):
        await store.commit(finished("kept", 1))
        for _ in range(5):
            await store.commit(Tx().event(E.NotificationSent(channel="c", event="x")))
        await store.commit(Tx().event(E.MissionRejected(file="/m/bad.json", hash="h", reason="invalid", errors=[],
                                                        lines=[]), mission_id="bad"))
        seqs = [r["seq"] for r in (await rows_of(store, backend, "events"))]
        total, cursor = 0, 0
        while True:
            n, nxt = await store.prune_events(cursor, iso(T0 + timedelta(seconds=1)), 3)
            total += n
            if nxt is None:
                break
            cursor = nxt
        left = (await rows_of(store, backend, "events"))
        assert total == 5  # the notifications; the rejection is the newest event: it stays
        assert {r["mission_id"] for r in left} == {"kept", "bad"} and max(r["seq"] for r in left) == max(seqs)
        assert await store.prune_events(0, iso(T0), 100) == (0, None)  # nothing older than the cut-off


async def test_handled_commands_and_past_days_of_spend_go_but_not_a_queued_command_or_today(backend: Backend) -> None:
    store = await backend.open()
    async with writing(store):
        done = await backend.queue_command("cancel", "x")
        queued = await backend.queue_command("retry", "y")
        await store.commit(Tx().command_done(done, "done", "ok", T0))
        tx = Tx()
        for day in ("2025-12-30", "2026-01-01"):
            add(tx, ("daemon", "", day, None, 1, 1, 0.1, 1, 1, 0, None, None, iso(T0)))
        await store.commit(tx)
        assert await store.prune_leftovers(iso(T0 + timedelta(days=1)), "2026-01-01") == 2
        assert [r["id"] for r in (await rows_of(store, backend, "commands"))] == [queued]
        assert [r["period"] for r in (await rows_of(store, backend, "spend"))] == ["2026-01-01"]


async def test_sqlite_gives_the_freed_pages_back_to_the_file_system(backend: Backend) -> None:
    if backend.kind != "sqlite":
        pytest.skip("SQLite's incremental vacuum")
    store = await backend.open()
    async with writing(store):
        for i in range(40):
            tx = finished(f"m{i}", i + 1)
            tx.transcript(f"m{i}:1/1", f"m{i}:1", "x" * 20_000)
            await store.commit(tx)
        assert backend.db_path is not None
        await store.prune_missions([f"m{i}" for i in range(40)], CUT)
        before = sum(p.stat().st_size for p in backend.db_path.parent.glob("polpo.db*"))
        freed = await store.reclaim(100_000)
        assert freed > 100
    after = os.path.getsize(backend.db_path)
    assert after < before / 2


async def test_sqlite_finds_the_missions_of_a_removal_by_their_ids_not_by_walking_the_finished_ones(
        backend: Backend) -> None:
    """Each statement of a removal and of its export reaches the missions through their primary key. SQLite's
    planner, which cannot tell that the list holds a few ids, took the status index instead: every statement
    walked every finished mission, 60 ms each at 100 000 missions, and a year's backlog took hours to remove."""
    if backend.kind != "sqlite":
        pytest.skip("SQLite's query plans")
    store = await backend.open()
    await store.close()
    assert backend.db_path is not None
    con = sqlite3.connect(backend.db_path)
    try:
        plans = {sql: [row[3] for row in con.execute(f"EXPLAIN QUERY PLAN {sql}", args)] for sql, args in
                 [*((sql, ("[]", CUT)) for sql in removal_statements("?")),
                  *((sql, ("[]",)) for _, sql in export_statements("?"))]}
    finally:
        con.close()
    for sql, plan in plans.items():
        on_missions = [step for step in plan if step.startswith(("SEARCH missions ", "SCAN missions"))]
        assert on_missions or sql not in removal_statements("?"), (sql, plan)  # each removal checks its missions
        assert all(step.endswith("sqlite_autoindex_missions_1 (id=?)") for step in on_missions), (sql, plan)


async def test_an_older_sqlite_file_mostly_free_is_converted_once_at_open(backend: Backend) -> None:
    if backend.kind != "sqlite":
        pytest.skip("SQLite's vacuum modes")
    import sqlite3

    assert backend.db_path is not None
    store = await backend.open()
    async with writing(store):
        for i in range(40):
            await store.commit(finished(f"m{i}", i + 1).transcript(f"m{i}:1/1", f"m{i}:1", "x" * 20_000))
    con = sqlite3.connect(backend.db_path, isolation_level=None)
    con.executescript("PRAGMA auto_vacuum=NONE; VACUUM; DELETE FROM transcripts;")  # as a file made before
    assert con.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    con.close()
    big = os.path.getsize(backend.db_path)
    store = await backend.open()
    await store.close()
    con = sqlite3.connect(backend.db_path)
    assert con.execute("PRAGMA auto_vacuum").fetchone()[0] == 2 and os.path.getsize(backend.db_path) < big / 2
    con.close()


async def test_the_files_records_are_walked_oldest_first_even_when_many_were_seen_at_once(backend: Backend) -> None:
    store = await backend.open()
    async with writing(store):
        tx = Tx()
        for name in ("c", "a", "b"):  # seen in the same millisecond
            tx.source(R.SourceRecord(f"/m/{name}.json", "h", SourceOutcome.REJECTED, None), T0)
        tx.source(R.SourceRecord("/m/young.json", "h", SourceOutcome.REJECTED, None), LATER)
        await store.commit(tx)
        seen, after = [], ("", "")
        while rows := await store.old_sources(after, CUT, 1):
            seen.append(rows[0][0])
            after = (rows[0][1], rows[0][0])
        assert seen == ["/m/a.json", "/m/b.json", "/m/c.json"]  # not the young one
