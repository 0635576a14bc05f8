"""Nothing is kept in memory per finished mission (issue 31): ids and run numbers come from the store when a file
needs them, and go on after a restart and after retention removed the earlier runs; SLA marks leave with their
mission."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from polpo.clock import FakeClock
from polpo.store.memory import MemoryStore
from tests.support.engine import EngineRun, ScriptAgent, config, engine_on_memory

pytestmark = pytest.mark.anyio


def doc(title: str) -> dict[str, object]:
    return {"tasks": [{"title": title, "description": "x", "assignTo": "fake"}]}


async def run_to_end(run: EngineRun, title: str, source: str) -> str:
    m = await run.accept(doc(title), source=source)
    await run.wait_event("mission:completed", mission_id=m.id)
    return m.id


async def test_runs_and_ids_go_on_across_restarts_and_retention_without_a_record_per_mission(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    clock, agents = FakeClock(), {"fake": ScriptAgent()}
    store = MemoryStore(clock)
    async with engine_on_memory(cfg, agents=agents, store=store, clock=clock) as run:
        assert await run_to_end(run, "a", "/missions/report.json") == "report"
        assert await run_to_end(run, "b", "/missions/report.json") == "report#2"
        assert await run_to_end(run, "c", "/other/report.json") == "report-2"  # another file, the same stem
    async with engine_on_memory(cfg, agents=agents, store=store, clock=clock) as run:
        adm = run.engine.admission
        assert len(adm.sources) == 0 and adm.next_seq == 4  # nothing per finished mission was read at start
        clock.advance(86400)
        removed = await store.prune_missions([r["id"] for r in store.rows("missions")], "9999")
        assert len(removed) == 3 and store.rows("missions") == []
        assert await run_to_end(run, "d", "/missions/report.json") == "report#3"  # its file's record kept the count
        assert adm.next_seq == 5


async def test_the_sla_keeper_forgets_a_finished_missions_marks(tmp_path: Path) -> None:
    """A deadline's marks are kept while its mission is open (so none is announced twice) and dropped when it
    finishes: a schedule with deadlines must not keep a record a run."""
    cfg = config(tmp_path)
    async with engine_on_memory(cfg, agents={"fake": ScriptAgent()}) as run:
        m = await run.accept({"deadline": "PT1H", "tasks": [{"title": "a", "description": "x", "assignTo": "fake",
                                                             "deadline": "PT1H"}]}, source="/missions/d.json")
        await run.wait_event("sla:met", mission_id=m.id)
        await run.wait_event("mission:completed", mission_id=m.id)
        assert run.engine.sla.marks == {}


async def test_a_finished_missions_workspace_is_no_longer_watched(tmp_path: Path) -> None:
    """Each watch is an inotify instance (128 per user by default): a schedule whose every run has a folder of its
    own must not keep one a run. The board's finish hook lets the tracker go of the folder."""
    cfg = config(tmp_path)
    watched: list[bool] = []
    agent = ScriptAgent(lambda r: watched.append(os.fspath(r.workspace) in run.engine.tracker.watches) or 0)
    async with engine_on_memory(cfg, agents={"fake": agent}) as run:
        for i in range(2):
            ws = tmp_path / f"run-{i}"
            ws.mkdir()
            m = await run.accept({"workspace": str(ws), **doc(f"t{i}")}, source=f"/missions/r{i}.json")
            await run.wait_event("mission:completed", mission_id=m.id)
        tracker = run.engine.tracker
        assert watched == [True, True]  # watched while its task ran
        assert not tracker.watches and not tracker._locks and not tracker.unwatchable
