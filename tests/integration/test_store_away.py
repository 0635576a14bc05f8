"""Reads that meet the PostgreSQL store away (its connections reset, new ones refused), a real server behind a TCP
proxy: not the user's mistake nor the task's, so nothing is rejected or failed for them.

* A mission file: the intake's read says the store is away (a passing fault), and the watcher tries the file again
  later (nemesis seed 1016 saw "internal error while handling m2.json" and the file rejected).
* A task's assessment: its read waits the outage out and the assessment resumes from the stored result, the agent
  not run again (nemesis seed 18 saw a task failed as an internal error of the task runner).
* A due firing: one warning, no traceback, and the next tick fires it (nemesis seed 57).
* The leader's timers (delays, approvals, questions): one warning, no traceback (nemesis seed 1012)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import orjson
import pytest

from polpo.agents.base import AgentRequest
from polpo.clock import FakeClock
from polpo.config import StoreSettings
from polpo.engine.questions import TICK_EVERY
from polpo.fsfaults import StoreAway, passing
from polpo.intake.handler import IntakeHandler
from polpo.intake.watcher import Intake
from polpo.store.outage_wait import quiet_driver_outages
from polpo.store.postgres import PostgresStore
from tests.support.engine import ScriptAgent, config, engine_on_memory
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.anyio

OUTAGE_HELD = 2.0
"""Seconds the way to the database stays refused: longer than the first tries' backoff (0.5 s, then 1 s)."""


async def test_a_file_met_while_the_database_is_away_is_tried_again_not_rejected(
        tmp_path: Path, postgres_url: str, caplog: pytest.LogCaptureFixture) -> None:
    url = urlsplit(postgres_url)
    proxy = TcpProxy(url.port or 5432).start()
    try:
        store = await PostgresStore.open(StoreSettings(url=url._replace(netloc=f"{url.username}@127.0.0.1:{proxy.port}")
                                                       .geturl(), pool_size=1), clock=FakeClock())
        doc = {"name": "m", "tasks": [{"title": "A", "description": "a", "assignTo": "fake"}]}
        async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent()}, store=store,  # type: ignore[arg-type]
                                    stop=False) as run:
            proxy.reset()
            proxy.close()  # the way to the server is gone: open connections reset, new ones refused
            handler = IntakeHandler(run.engine.admission, known_agents=run.engine.agents.known_names(), channels=None)
            with caplog.at_level(logging.ERROR, logger="polpo.intake"), pytest.raises(StoreAway) as away:
                await handler(tmp_path / "m.json", orjson.dumps(doc))
            assert passing(away.value) is not None  # what the watcher waits out, then tries the file again
        assert not [r for r in caplog.records if r.name == "polpo.intake"]
        assert not [e for e in run.events if e.event in ("mission:rejected", "mission:accepted")]
    finally:
        proxy.close()


async def test_the_start_up_scan_meeting_the_database_away_waits_without_a_traceback_and_takes_the_file_in(
        tmp_path: Path, postgres_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """Nemesis seed 9517: the intake's scan of the missions folder read the files' records while PostgreSQL was
    away, and logged "watching … failed" with a traceback twice a second until it came back."""
    url = urlsplit(postgres_url)
    proxy = TcpProxy(url.port or 5432).start()
    heal = threading.Timer(OUTAGE_HELD, proxy.allow)
    try:
        store = await PostgresStore.open(StoreSettings(url=url._replace(netloc=f"{url.username}@127.0.0.1:{proxy.port}")
                                                       .geturl(), pool_size=1), clock=FakeClock())
        folder = tmp_path / "missions"
        folder.mkdir(exist_ok=True)
        (folder / "m.json").write_text(orjson.dumps(
            {"name": "m", "tasks": [{"title": "A", "description": "a", "assignTo": "fake"}]}).decode())
        async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent()}, store=store,  # type: ignore[arg-type]
                                    stop=False) as run:
            handler = IntakeHandler(run.engine.admission, known_agents=run.engine.agents.known_names(), channels=None)
            intake = Intake(folder, handler, force_polling=True, faults=handler, unchanged=handler.unchanged)
            proxy.refuse()
            proxy.reset()  # the way to the server is gone until the timer lets it through again
            heal.start()
            async with anyio.create_task_group() as tg:
                tg.start_soon(intake.run)
                accepted = await run.wait_event("mission:accepted", timeout=60)
                intake.stop_event.set()
    finally:
        heal.cancel()
        proxy.close()
    assert accepted.mission_id is not None  # the file was taken in once the database answered
    assert not [r for r in caplog.records if r.exc_info is not None and r.name.startswith("polpo")]
    assert not [r for r in caplog.records if "watching" in r.getMessage() and "failed" in r.getMessage()]
    [paused] = [r for r in caplog.records if r.getMessage().startswith("intake paused on")]  # said once
    assert "the state store did not answer" in paused.getMessage()


async def test_an_assessment_whose_read_meets_the_database_away_waits_and_the_task_passes(
        tmp_path: Path, postgres_url: str) -> None:
    url = urlsplit(postgres_url)
    proxy = TcpProxy(url.port or 5432).start()
    heal = threading.Timer(OUTAGE_HELD, proxy.allow)

    def act(r: AgentRequest) -> int:  # the agent's work is done, then the way to the database goes
        (r.workspace / "cov.txt").write_text("80\n")
        proxy.refuse()
        proxy.reset()
        heal.start()
        return 0

    agent = ScriptAgent(act)
    metric = {"type": "metric", "name": "coverage", "command": "cat cov.txt 2>/dev/null || echo 50",
              "baseline": "before", "min": 60}  # its baseline is read back from the store by the assessment
    try:
        store = await PostgresStore.open(StoreSettings(url=url._replace(netloc=f"{url.username}@127.0.0.1:{proxy.port}")
                                                       .geturl(), pool_size=2), clock=FakeClock())
        async with engine_on_memory(config(tmp_path), agents={"fake": agent}, store=store) as run:  # type: ignore[arg-type]
            m = await run.accept({"tasks": [{"title": "cover", "description": "d", "assignTo": "fake",
                                             "maxRetries": 0, "maxFixAttempts": 0, "expectations": [metric]}]})
            done = await run.wait_event("mission:completed", mission_id=m.id, timeout=60)
    finally:
        heal.cancel()
        proxy.close()
    assert done.data["outcome"] == "completed", [(e.event, e.data) for e in run.events][-8:]
    assert len(agent.requests) == 1  # the agent ran once: the assessment resumed from its stored result
    assert not [e for e in run.events if e.event == "task:error"]


async def test_a_due_firing_whose_read_meets_the_database_away_waits_for_the_next_tick(
        tmp_path: Path, postgres_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """One warning, no traceback, and the firing happens at the next tick once the database answers (nemesis seed
    57 logged a traceback for each tick of the outage)."""
    url = urlsplit(postgres_url)
    proxy = TcpProxy(url.port or 5432).start()
    start = datetime(2026, 3, 23, 0, 0, 30, tzinfo=UTC)
    doc = {"name": "report", "tasks": [{"title": "Write", "description": "w", "assignTo": "fake"}],
           "schedule": "*/1 * * * *"}
    try:
        store = await PostgresStore.open(StoreSettings(url=url._replace(netloc=f"{url.username}@127.0.0.1:{proxy.port}")
                                                       .geturl(), pool_size=2), clock=FakeClock(start))
        async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent()}, store=store,  # type: ignore[arg-type]
                                    clock=FakeClock(start)) as run:
            handler = IntakeHandler(run.engine.admission, known_agents=run.engine.agents.known_names(),
                                    channels=None, schedules=run.engine.schedules)
            assert await handler(tmp_path / "report.json", orjson.dumps(doc)) == "scheduled"
            run.clock.set(start + timedelta(minutes=1))
            proxy.refuse()
            proxy.reset()
            with caplog.at_level(logging.WARNING, logger="polpo.schedules"):
                await run.engine.schedules.tick(run.clock.now())
                await run.engine.schedules.tick(run.clock.now())
            proxy.allow()
            await run.engine.schedules.tick(run.clock.now())
            fired = await run.wait_event("schedule:triggered", timeout=30)
    finally:
        proxy.close()
    logged = [r for r in caplog.records if r.name == "polpo.schedules"]
    assert logged and all(r.levelno == logging.WARNING and not r.exc_info for r in logged), logged
    assert "the schedules waits for the database" in logged[0].getMessage()  # said once, then (maybe) resumed
    assert len([r for r in logged if "waits for the database" in r.getMessage()]) == 1
    assert fired.event == "schedule:triggered"


async def test_the_timers_meeting_the_database_away_say_so_once_without_a_traceback(
        tmp_path: Path, postgres_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """The leader's timers read the questions that are due at every poll: with the database's connections reset,
    one warning and one when they resume, never a traceback per poll (nemesis seed 1012 logged one)."""
    url = urlsplit(postgres_url)
    proxy = TcpProxy(url.port or 5432).start()
    try:
        store = await PostgresStore.open(StoreSettings(url=url._replace(netloc=f"{url.username}@127.0.0.1:{proxy.port}")
                                                       .geturl(), pool_size=2), clock=FakeClock())
        async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent()}, store=store,  # type: ignore[arg-type]
                                    clock=FakeClock()) as run, anyio.create_task_group() as tg:
            await run.engine.commands.timers(tg)
            proxy.refuse()
            proxy.reset()
            with caplog.at_level(logging.WARNING, logger="polpo.commands"):
                for poll in range(3):  # (the questions are read at most every TICK_EVERY seconds)
                    if poll == 2:
                        proxy.allow()
                    await anyio.sleep(TICK_EVERY)
                    await run.engine.commands.timers(tg)
    finally:
        proxy.close()
    logged = [r for r in caplog.records if r.name == "polpo.commands"]
    assert logged and all(r.levelno == logging.WARNING and not r.exc_info for r in logged), logged
    said = [r.getMessage() for r in logged]
    assert said[0].startswith("the leader's timer loop waits for the database"), said
    assert len([m for m in said if "waits for the database" in m]) == 1, said
    assert said[-1].startswith("the leader's timer loop resumed after"), said


async def test_a_store_close_cut_short_while_its_pool_reconnects_is_cancelled_cleanly(postgres_url: str) -> None:
    """The stop's last step closes the store under a deadline. Behind a half-open network the pool's upkeep is
    stuck reconnecting, and asyncpg's close cancels it and waits for it. A deadline landing in that same moment
    (all timers fire at once when a SIGSTOPped node resumes) came back as the upkeep's own cancellation, which
    anyio could not tell from a real one: the daemon ended with a traceback (nemesis seed 1012). Now the step
    ends as cut short, the pool terminated."""
    url = urlsplit(postgres_url)
    proxy = TcpProxy(url.port or 5432).start()
    try:
        store = await PostgresStore.open(StoreSettings(url=url._replace(netloc=f"{url.username}@127.0.0.1:{proxy.port}")
                                                       .geturl(), pool_size=2), clock=FakeClock())
        proxy.blackhole()
        proxy.reset()  # the pool's connection is gone; a new one hangs (no FIN, no RST)
        await anyio.sleep(1.5)  # the pool's upkeep is reconnecting
        with anyio.CancelScope() as scope:
            asyncio.get_running_loop().call_soon(scope.cancel)  # the deadline, in the moment the close begins
            await store.close()
    finally:
        proxy.close()
    assert scope.cancelled_caught
    assert store.pool.is_closing()


async def leftover_release(postgres_url: str) -> None:
    """A pooled connection in a transaction, given back under a deadline that cuts the release short while the
    database does not answer, then the connection reset: asyncpg's shielded release task fails unobserved."""
    import gc

    import asyncpg

    url = urlsplit(postgres_url)
    loop = asyncio.get_running_loop()
    runners = loop.get_exception_handler()  # (the test runner's collects what the daemon's loop would log)
    loop.set_exception_handler(None)
    with TcpProxy(url.port or 5432) as proxy, contextlib.ExitStack() as back:
        back.callback(loop.set_exception_handler, runners)
        pool = await asyncpg.create_pool(url._replace(netloc=f"{url.username}@127.0.0.1:{proxy.port}").geturl(),
                                         min_size=1, max_size=1)
        con = await pool.acquire()
        await con.execute("BEGIN")  # its release must roll back first
        proxy.blackhole()
        with anyio.move_on_after(0.3):  # the stop's deadline
            await pool.release(con)
        proxy.reset()
        await anyio.sleep(0.5)  # the release's ROLLBACK learns the connection is gone
        pool.terminate()
        del con, pool
        gc.collect()


async def test_a_release_a_stop_cut_short_is_one_warning_not_a_traceback(
        postgres_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """Nemesis seed 8603: asyncio reported asyncpg's failed release task, never retrieved, with its traceback."""
    await leftover_release(postgres_url)
    raw = [r for r in caplog.records if "never retrieved" in r.getMessage()]
    assert raw and raw[0].exc_info is not None  # what the driver leaves, without polpo's filter
    caplog.clear()
    quiet_driver_outages()
    try:
        await leftover_release(postgres_url)
    finally:
        for name in ("asyncio", "asyncpg.pool"):
            logging.getLogger(name).filters.clear()
    [said] = [r for r in caplog.records if "not given back to its pool" in r.getMessage()]
    assert said.levelno == logging.WARNING and said.exc_info is None
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
