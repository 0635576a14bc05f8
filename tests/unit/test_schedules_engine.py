"""Scheduled missions on the real engine and the in-memory store, driven by a fake clock.

A schedule is made by the intake's handler from a file's bytes, as the daemon does; ``tick(now)`` is what the
daemon's loop calls when a firing is due. A "restart" is a new engine on the same store after leaving without a
stop (what ``kill -9`` leaves behind).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from polpo.agents.base import AgentRequest
from polpo.clock import FakeClock
from polpo.engine.schedules import MAX_SLEEP
from polpo.intake.handler import IntakeHandler
from polpo.store.memory import MemoryStore
from tests.support.engine import EngineRun, ScriptAgent, config, engine_on_memory

pytestmark = pytest.mark.anyio

START = datetime(2026, 3, 23, 0, 0, 30, tzinfo=UTC)


def scheduled(**top: Any) -> dict[str, Any]:
    return {"name": "report", "tasks": [{"title": "Write", "description": "write it", "assignTo": "fake"}],
            "schedule": "*/1 * * * *", **top}


async def register(run: EngineRun, doc: dict[str, Any], path: str = "/missions/report.json") -> str:
    handler = IntakeHandler(run.engine.admission, known_agents=run.engine.agents.known_names(), channels=None,
                            schedules=run.engine.schedules)
    return await handler(Path(path), orjson.dumps(doc))


async def at(run: EngineRun, when: datetime) -> None:
    """The clock reaches ``when`` and the daemon's loop looks (what it does when a firing is due)."""
    run.clock.set(when)
    await run.engine.schedules.tick(run.clock.now())
    await run.store.flush()


def minute(n: int, second: int = 0) -> datetime:
    return START.replace(second=0) + timedelta(minutes=n, seconds=second)


class Gate:
    """An agent whose runs wait until released: a run that is still going when the next firing is due."""

    def __init__(self) -> None:
        self.release = anyio.Event()

    async def __call__(self, _r: AgentRequest) -> int:
        await self.release.wait()
        return 0


@asynccontextmanager
async def engine(tmp_path: Path, *, agent: ScriptAgent | None = None, store: MemoryStore | None = None,
                 clock: FakeClock | None = None, stop: bool = True) -> AsyncIterator[EngineRun]:
    cfg = config(tmp_path)
    async with engine_on_memory(cfg, agents={"fake": agent or ScriptAgent()}, store=store,
                                clock=clock or FakeClock(START), stop=stop) as run:
        yield run


def triggered(run: EngineRun) -> list[str]:
    return [e.mission_id or "" for e in run.of("schedule:triggered")]


async def test_a_scheduled_file_starts_nothing_until_its_first_firing(tmp_path: Path) -> None:
    async with engine(tmp_path) as run:
        assert await register(run, scheduled()) == "scheduled"
        created = run.of("schedule:created")[0]
        assert created.mission_id == "report" and created.data["nextRunAt"] == "2026-03-23T00:01:00.000Z"
        await at(run, minute(0, 59))
        assert triggered(run) == [] and not run.of("mission:accepted")


async def test_every_minute_fires_once_per_minute_each_a_new_run(tmp_path: Path) -> None:
    async with engine(tmp_path) as run:
        await register(run, scheduled())
        for n in (1, 2, 3):
            await at(run, minute(n))
            await at(run, minute(n, 20))  # the loop looks again within the minute: nothing more
            await run.wait_event("mission:completed", mission_id=triggered(run)[-1])
        assert triggered(run) == ["report", "report#2", "report#3"]
        assert [e.data["scheduledFor"] for e in run.of("schedule:triggered")] == [
            "2026-03-23T00:01:00.000Z", "2026-03-23T00:02:00.000Z", "2026-03-23T00:03:00.000Z"]
        # the firing, the schedule's cursor and the run were one transaction, in that order
        seqs = {e.event: e.seq for e in run.events if e.mission_id == "report#3"}
        assert seqs["schedule:triggered"] < seqs["mission:accepted"]
        row = run.store.rows("schedules")[0]
        assert (row["cursor_at"], row["last_run"]) == ("2026-03-23T00:03:00.000Z", "report#3")


async def test_a_restart_neither_loses_nor_repeats_a_firing(tmp_path: Path) -> None:
    store = MemoryStore(FakeClock(START))
    clock = FakeClock(START)
    async with engine(tmp_path, store=store, clock=clock, stop=False) as run:
        await register(run, scheduled())
        await at(run, minute(1))
        await run.wait_event("mission:completed", mission_id="report")
    # kill -9 after the firing: a new daemon on the same store, at the same instant
    async with engine(tmp_path, store=store, clock=clock) as run:
        await at(run, minute(1, 5))
        assert triggered(run) == []  # not twice
        await at(run, minute(2))
        assert triggered(run) == ["report#2"]  # not lost either
        await run.wait_event("mission:completed", mission_id="report#2")


async def test_skip_while_a_run_is_active(tmp_path: Path) -> None:
    gate = Gate()
    async with engine(tmp_path, agent=ScriptAgent(gate)) as run:
        await register(run, scheduled())
        await at(run, minute(1))
        await run.wait_event("agent:spawned")
        await at(run, minute(2))
        skipped = run.of("schedule:skipped")
        assert [e.data["reason"] for e in skipped] == ["a run is active (report)"]
        assert triggered(run) == ["report"]
        gate.release.set()
        await run.wait_event("mission:completed", mission_id="report")
        await at(run, minute(3))
        assert triggered(run) == ["report", "report#2"]
        await run.wait_event("mission:completed", mission_id="report#2")


async def test_queue_runs_the_waiting_firing_when_the_run_ends(tmp_path: Path) -> None:
    gate = Gate()
    async with engine(tmp_path, agent=ScriptAgent(gate)) as run:
        await register(run, scheduled(overlap="queue"))
        await at(run, minute(1))
        await run.wait_event("agent:spawned")
        await at(run, minute(2))
        assert [e.data["behind"] for e in run.of("schedule:queued")] == ["report"]
        assert triggered(run) == ["report"]
        gate.release.set()
        await run.wait_event("mission:completed", mission_id="report")
        await at(run, minute(2, 30))
        assert triggered(run) == ["report", "report#2"]
        assert run.store.rows("schedules")[0]["queued"] == 0
        await run.wait_event("mission:completed", mission_id="report#2")


async def test_queued_firings_start_as_each_run_ends_and_a_backlog_drains(tmp_path: Path) -> None:
    """The daemon's loop sleeps until the next firing (at most MAX_SLEEP); a queued firing starts when the run
    before it ends, not at the next firing (which queued one more each time: a backlog never drained), so three
    firings queued behind a long run (as after a downtime) run one after the other while the clock stands still."""
    gate = Gate()
    async with engine(tmp_path, agent=ScriptAgent(gate)) as run:
        await register(run, scheduled(overlap="queue"))
        await at(run, minute(1))
        await run.wait_event("agent:spawned")
        for n in (2, 3, 4):
            await at(run, minute(n))
        assert run.store.rows("schedules")[0]["queued"] == 3
        async with anyio.create_task_group() as tg:
            tg.start_soon(run.engine.schedules.run)  # the daemon's loop; the next firing is a minute away
            gate.release.set()
            for mid in ("report", "report#2", "report#3", "report#4"):
                await run.wait_event("mission:completed", mission_id=mid, timeout=MAX_SLEEP - 1)
            tg.cancel_scope.cancel()
        assert triggered(run) == ["report", "report#2", "report#3", "report#4"]
        assert run.store.rows("schedules")[0]["queued"] == 0


async def test_cancel_previous_cancels_the_active_run_and_starts_anew(tmp_path: Path) -> None:
    gate = Gate()
    async with engine(tmp_path, agent=ScriptAgent(gate)) as run:
        await register(run, scheduled(overlap="cancel-previous"))
        await at(run, minute(1))
        await run.wait_event("agent:spawned")
        await at(run, minute(2))
        assert run.of("mission:cancelled", mission_id="report")[0].data["by"] == "schedule report"
        assert triggered(run) == ["report", "report#2"]
        await run.wait_event("mission:completed", mission_id="report")
        gate.release.set()
        await run.wait_event("mission:completed", mission_id="report#2")


@pytest.mark.parametrize(("catch_up", "runs", "let_go"), [("none", 0, 5), ("one", 1, 4), ("all", 5, 0)])
async def test_catch_up_after_downtime(tmp_path: Path, catch_up: str, runs: int, let_go: int) -> None:
    store = MemoryStore(FakeClock(START))
    clock = FakeClock(START)
    async with engine(tmp_path, store=store, clock=clock, stop=False) as run:
        await register(run, scheduled(catchUp=catch_up, overlap="queue", misfireGrace="PT10S"))
    clock.set(minute(5, 30))  # down from 00:00:30 to 00:05:30: five firings (00:01 … 00:05), all late
    async with engine(tmp_path, store=store, clock=clock) as run:
        await at(run, minute(5, 30))
        for _ in range(runs):  # with overlap "queue", the caught-up firings run one after the other
            if triggered(run):
                await run.wait_event("mission:completed", mission_id=triggered(run)[-1])
            await at(run, run.clock.now() + timedelta(seconds=1))
        started = run.of("schedule:triggered")
        assert len(started) == runs
        assert not started or started[0].data["catchUp"]  # (the queued ones start later, when their turn comes)
        assert sum(e.data["count"] for e in run.of("schedule:skipped")) == let_go
        if runs:
            await run.wait_event("mission:completed", mission_id=triggered(run)[-1])


async def test_pause_resume_remove(tmp_path: Path) -> None:
    async with engine(tmp_path) as run:
        await register(run, scheduled())
        cmd = run.engine.commands
        assert (await cmd.apply("schedule-pause", "report"))[0] == "done"
        await at(run, minute(1))
        await at(run, minute(2))
        assert triggered(run) == []
        status, answer = await cmd.apply("schedule-resume", "report")
        assert status == "done" and "next run 2026-03-23T00:03:00.000Z" in answer  # what fell due is let go
        await at(run, minute(3))
        assert triggered(run) == ["report"]
        await run.wait_event("mission:completed", mission_id="report")
        assert (await cmd.apply("schedule-remove", "report"))[0] == "done"
        await at(run, minute(4))
        assert triggered(run) == ["report"]
        assert [e.data["action"] for e in run.of("schedule:changed")] == ["paused", "resumed", "removed"]
        status, answer = await cmd.apply("schedule-pause", "report")
        assert status == "refused" and "no schedule 'report'" in answer


async def test_a_one_shot_fires_once_then_expires(tmp_path: Path) -> None:
    async with engine(tmp_path) as run:
        await register(run, scheduled(schedule="2026-03-23T01:01:00+01:00"))
        await at(run, minute(0, 50))
        assert triggered(run) == []
        await at(run, minute(1))
        assert triggered(run) == ["report"] and len(run.of("schedule:expired")) == 1
        await at(run, minute(3))
        assert triggered(run) == ["report"]
        await run.wait_event("mission:completed", mission_id="report")


async def test_an_edit_replaces_the_schedule_and_the_same_bytes_change_nothing(tmp_path: Path) -> None:
    async with engine(tmp_path) as run:
        assert await register(run, scheduled()) == "scheduled"
        assert await register(run, scheduled()) == "duplicate"
        assert await register(run, scheduled(schedule="0 9 * * 1-5", timezone="Europe/Rome")) == "scheduled"
        rows = run.store.rows("schedules")
        assert len(rows) == 1 and rows[0]["expr"] == "0 9 * * 1-5"
        await at(run, minute(5))
        assert triggered(run) == []
        await at(run, datetime(2026, 3, 23, 8, 0, tzinfo=UTC))  # 09:00 in Rome
        assert triggered(run) == ["report"]
        await run.wait_event("mission:completed", mission_id="report")


def digest(doc: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(doc)).hexdigest()


async def test_in_a_cluster_only_the_leader_fires_and_a_new_leader_goes_on_from_the_stored_cursor(
        tmp_path: Path) -> None:
    from tests.support.memory_cluster import memory_cluster

    async with memory_cluster(config(tmp_path)) as c:
        c.clock.set(START)
        for name in ("L", "W"):
            await c.add(name, {"fake": ScriptAgent()})
        c.heartbeat()
        await c.lead("L")
        leader = c.nodes["L"].engine
        handler = IntakeHandler(leader.admission, known_agents=leader.agents.known_names(), channels=None,
                                schedules=leader.schedules)
        doc = scheduled(settings={"affinity": "any"})  # its runs' tasks go to whichever node claims them
        assert await handler(Path("/missions/report.json"), orjson.dumps(doc)) == "scheduled"

        async def reach(when: datetime, runs: int) -> None:
            c.clock.set(when)
            c.heartbeat()
            for n in c.nodes.values():
                n.engine.schedules.wake()
            with anyio.fail_after(10):
                while len(c.of("schedule:triggered")) < runs:
                    await anyio.sleep(0.01)
            await c.wait_event("mission:completed", mission_id=c.of("schedule:triggered")[-1].mission_id)

        await reach(minute(1), 1)
        c.depose("L")
        await c.lead("W")
        await reach(minute(1, 30), 1)  # the new leader read the cursor: 00:01 is not fired again
        await reach(minute(2), 2)
        fired = c.of("schedule:triggered")
        assert [(e.node, e.mission_id, e.data["scheduledFor"]) for e in fired] == [
            ("L", "report", "2026-03-23T00:01:00.000Z"), ("W", "report#2", "2026-03-23T00:02:00.000Z")]


async def test_a_fenced_node_lets_a_due_firing_go_without_an_error(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    """A node that may no longer write (its lease is gone) meets a due firing: it is stopping and says why; the
    firing is the next leader's, so no traceback is logged and nothing fires here (nemesis seeds 36 and 43)."""
    async with engine(tmp_path, stop=False) as run:
        assert await register(run, scheduled()) == "scheduled"
        run.store.fence("node a (incarnation x) no longer holds its lease")
        with caplog.at_level(logging.ERROR, logger="polpo.schedules"):
            run.clock.set(minute(1, 5))
            await run.engine.schedules.tick(run.clock.now())
    assert not [r for r in caplog.records if r.name == "polpo.schedules"]
    assert triggered(run) == []
