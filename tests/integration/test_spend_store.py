"""Spend survives a restart on every backend (memory, SQLite, PostgreSQL): what a daemon's book wrote before it
stopped is what the next daemon's book starts from, budgets' crossing flags included (so ``budget:exceeded`` is
not sent twice for one crossing), and the first state written after a start is never a reset."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from polpo.cli.control import retry
from polpo.clock import FakeClock
from polpo.config import Config, load_config
from polpo.engine.commands import retry_target
from polpo.engine.spend_book import EXCEEDED, SpendBook
from polpo.engine.spend_rules import Limit
from polpo.llm.client import LLMClient, LLMError, ModelSettings
from polpo.llm.spend import metering
from polpo.mission.schema import MissionSpec
from polpo.model.status import MissionStatus, TaskStatus
from polpo.store import spend_writes
from polpo.store.core import StoreCore
from polpo.store.sqlite import SqliteStore
from tests.support.fake_llm import FakeLLM, error, text
from tests.support.stores import Backend, mission, task, writing

pytestmark = pytest.mark.anyio

SPEC = MissionSpec.model_validate({"settings": {"budget": {"usd": 1.0}},
                                   "tasks": [{"title": "t", "description": "d", "budget": {"tokens": 500}}]})


async def reopened(backend: Backend) -> tuple[StoreCore, FakeClock]:
    """A store that outlives its daemon (not the memory one), opened; and its clock."""
    if backend.kind == "memory":
        pytest.skip("nothing survives a memory store (its reads are in tests/integration/test_budgets.py)")
    assert isinstance(backend.clock, FakeClock)
    return await backend.open(), backend.clock


def book(store: object, clock: FakeClock) -> SpendBook:
    cfg = Config.model_validate({"budget": {"daily_tokens": 10_000}})
    return SpendBook(cfg, store, clock)  # type: ignore[arg-type]


async def test_spend_and_its_flags_are_read_back_after_a_restart(backend: Backend) -> None:
    store, clock = await reopened(backend)
    async with writing(store):
        await store.commit(store.tx().mission(mission()))  # an open mission: its accounts are loaded at start
        spend = book(store, clock)
        meter = spend.meter("m:1", "m", "coder", SPEC.tasks[0], SPEC)
        ticket = await meter.admit("openai/fake-model", lambda: (100, 200))
        meter.record(ticket, "openai/fake-model", 120, 80, None)
        with pytest.raises(Exception, match="cannot fit the next call"):
            await meter.admit("openai/fake-model", lambda: (100, 201))  # 200 spent + 301 > 500 tokens
        spend.raise_task("m:2", "m", Limit(0.5, None))  # `polpo retry m:2 --budget 0.5`
        await store.flush()
    store = await backend.open()
    async with writing(store):
        again = book(store, clock)
        await again.load()
        task = again.spend_of("task", "m:1")
        assert (task.tokens_in, task.tokens_out, task.calls, task.usd_known) == (120, 80, 1, False)
        assert again.accounts[("task", "m:1", "")].flags & EXCEEDED  # crossed once: not announced again
        assert again.spend_of("mission", "m").tokens == 200
        assert again.spend_of("daemon", "", "2026-01-01").tokens == 200
        assert again.spend_of("agent", "coder", "2026-01-01").calls == 1
        assert again.spent_fixed(again.meter("m:1", "m", "coder", SPEC.tasks[0], SPEC)) is not None
        assert again.daemon_limit == Limit(None, 10_000)
        assert again.meter("m:2", "m", "coder", SPEC.tasks[0], SPEC).limits == (Limit(0.5, None), Limit(1.0, None))


def spend_row(scope: str, key: str, period: str, mission_id: str | None) -> tuple[object, ...]:
    return (scope, key, period, mission_id, 1, 2, 0.5, 1, 1, 0, None, None, "2026-01-01T00:00:00.000Z")


async def test_the_spend_read_is_the_days_accounts_and_the_open_missions_each_once(backend: Backend) -> None:
    """What a daemon's book starts from (``Store.spend_rows``, one named read for the three backends): the day's
    agent and daemon accounts and every account of a mission still running or cancelling; not another day's, not
    a finished mission's."""
    store = await backend.open()
    async with writing(store):
        tx = store.tx().mission(mission("m1", 1)).mission(mission("m2", 2, MissionStatus.COMPLETED)).mission(
            mission("m3", 3, MissionStatus.CANCELLING))
        for account in (("task", "m1:1", "", "m1"), ("mission", "m1", "", "m1"), ("task", "m2:1", "", "m2"),
                        ("mission", "m2", "", "m2"), ("mission", "m3", "", "m3"), ("daemon", "", "2026-01-01", None),
                        ("agent", "coder", "2026-01-01", None), ("daemon", "", "2025-12-31", None)):
            spend_writes.add(tx, spend_row(*account))
        await store.commit(tx)
        got = await store.spend_rows("2026-01-01")
    assert sorted((r["scope"], r["key"], r["period"]) for r in got) == [
        ("agent", "coder", "2026-01-01"), ("daemon", "", "2026-01-01"), ("mission", "m1", ""), ("mission", "m3", ""),
        ("task", "m1:1", "")]
    assert {(r["tokens_in"], r["tokens_out"], r["usd"], r["usd_known"]) for r in got} == {(1, 2, 0.5, 1)}


async def test_spend_is_added_never_written_over_and_a_raise_clears_the_crossings(backend: Backend) -> None:
    """Two nodes' books adding to one account (the same statements on every backend): the row is the sum of their
    calls, a crossing flag once set stays set, one call with no price makes the row's dollars a floor; a raised
    budget is written as it is, counts one raise and clears the crossings, and a crossing marked under the count
    before it is not kept; the mission's read (``spend_now``) returns it all."""
    store = await backend.open()
    async with writing(store):
        await store.commit(spend_writes.add(store.tx(), spend_row("mission", "m1", "", "m1")))
        flagged = (*spend_row("mission", "m1", "", "m1")[:9], 2, None, None, "2026-01-01T00:00:01.000Z")
        unknown = (*spend_row("mission", "m1", "", "m1")[:6], 0.0, 0, 1, 0, None, None, "2026-01-01T00:00:02.000Z")
        await store.commit(spend_writes.add(spend_writes.add(store.tx(), flagged), unknown))
        [row] = await store.spend_now("m1", None)
        assert (row["tokens_in"], row["tokens_out"], row["usd"], row["calls"]) == (3, 6, 1.0, 3)
        assert (row["usd_known"], row["flags"]) == (0, 2)
        raised = (*spend_row("task", "m1:1", "", "m1")[:4], 0, 0, 0.0, 1, 0, 0, 0.5, 200, "2026-01-01T00:00:03.000Z")
        await store.commit(spend_writes.add(store.tx(), (*spend_row("task", "m1:1", "", "m1")[:9], 3, None, None,
                                                         "2026-01-01T00:00:03.000Z")))
        await store.commit(spend_writes.raise_limit(store.tx(), raised))
        task_row = next(r for r in await store.spend_now("m1", "2026-01-01") if r["scope"] == "task")
        assert (task_row["flags"], task_row["limit_usd"], task_row["limit_tokens"]) == (4, 0.5, 200)  # raise #1
        assert (task_row["tokens_in"], task_row["calls"]) == (1, 1)  # a raise adds nothing
        stale = (*spend_row("task", "m1:1", "", "m1")[:9], 2, None, None, "2026-01-01T00:00:04.000Z")
        await store.commit(spend_writes.add(store.tx(), stale))  # a node that had not seen the raise
        task_row = next(r for r in await store.spend_now("m1", None) if r["scope"] == "task")
        assert (task_row["flags"], task_row["calls"]) == (4, 2)  # its call counts; its crossing does not


async def test_polpo_retry_budget_queues_the_raised_budget_in_the_inbox(tmp_path: Path) -> None:
    """The CLI as a user runs it, on a real SQLite store with no daemon running: the command waits in the inbox
    with the budget, in the form the engine's command reads."""
    path = tmp_path / "polpo.toml"
    path.write_text('[daemon]\nstate_dir = "state"\nmissions_dir = "missions"\n')
    (tmp_path / "missions").mkdir()
    cfg = load_config(path)
    cfg.state_dir.mkdir(parents=True)
    store = await SqliteStore.open(cfg.db_path, clock=FakeClock())
    m = mission()
    async with writing(store):
        await store.commit(store.tx().mission(m).task(task(m, 0, TaskStatus.FAILED)))
    res = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(
        retry, ["m:1", "--budget", "0.5", "--tokens", "200000", "--config", str(path)]))
    assert res.exit_code == 0, res.output
    assert "queued retry m:1: no daemon is running" in res.output
    with sqlite3.connect(cfg.db_path) as con:
        [(kind, target)] = con.execute("SELECT kind, target FROM commands").fetchall()
    assert kind == "retry" and retry_target(target) == ("m:1", Limit(0.5, 200000))
    bad = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(
        retry, ["m:1", "--budget", "-1", "--config", str(path)]))
    assert bad.exit_code != 0 and "--budget" in bad.output


async def test_a_calls_estimate_is_stored_before_the_call_and_a_crash_leaves_it_counted(backend: Backend) -> None:
    """A call that a budget applies to: its estimate is in the rows when ``admit`` returns (before the request is
    sent); its reply settles it to what it used. A daemon that died between a reply and its settlement leaves the
    estimate counted, and the next daemon's budget counts it."""
    store, clock = await reopened(backend)
    async with writing(store):
        await store.commit(store.tx().mission(mission()))
        meter = book(store, clock).meter("m:1", "m", "coder", SPEC.tasks[0], SPEC)
        ticket = await meter.admit("openai/fake-model", lambda: (30, 100))
        [row] = [r for r in await store.spend_now("m", None) if r["scope"] == "task"]
        assert (row["tokens_in"], row["tokens_out"], row["calls"]) == (30, 100, 1)  # durable before the call
        meter.record(ticket, "openai/fake-model", 20, 40, None)  # the reply: settled to what it used
        await store.flush()
        [row] = [r for r in await store.spend_now("m", None) if r["scope"] == "task"]
        assert (row["tokens_in"], row["tokens_out"], row["calls"]) == (20, 40, 1)
        await meter.admit("openai/fake-model", lambda: (50, 200))  # served; the daemon dies before the reply is told
    store = await backend.open()
    async with writing(store):
        again = book(store, clock)
        await again.load()
        task = again.spend_of("task", "m:1")
        assert (task.tokens, task.calls) == (310, 2)  # the unsettled call at its estimate: pessimistic
        assert again.spend_of("daemon", "", "2026-01-01").tokens == 310
        meter = await again.open_meter("m:1", "m", "coder", SPEC.tasks[0], SPEC)
        with pytest.raises(Exception, match="cannot fit the next call"):
            await meter.admit("openai/fake-model", lambda: (50, 150))  # 310 + 200 > 500 tokens


async def test_a_call_the_provider_fails_takes_its_hold_back_and_one_it_answers_counts_what_it_used(
        backend: Backend) -> None:
    """Through the LLM client: a failed call's hold (in the rows before it was sent) is settled to nothing — a
    budget is not spent by a provider's errors — and an answered one to its reply's usage."""
    store = await backend.open()
    with FakeLLM() as srv:
        srv.script(error(500), text("ok", usage={"prompt_tokens": 20, "completion_tokens": 10}))
        model = ModelSettings(model="openai/fake-model", api_base=srv.base_url, max_tokens=100)
        client, hi = LLMClient(max_retries=0), [{"role": "user", "content": "hi"}]
        async with writing(store):
            await store.commit(store.tx().mission(mission()))
            meter = book(store, backend.clock).meter("m:1", "m", "coder", SPEC.tasks[0], SPEC)
            with metering(meter):
                with pytest.raises(LLMError):
                    await client.chat(model, hi)
                await store.flush()
                [row] = [r for r in await store.spend_now("m", None) if r["scope"] == "task"]
                assert (row["tokens_in"], row["tokens_out"], row["calls"]) == (0, 0, 0)
                await client.chat(model, hi)
            await store.flush()
            [row] = [r for r in await store.spend_now("m", None) if r["scope"] == "task"]
            assert (row["tokens_in"], row["tokens_out"], row["calls"]) == (20, 10, 1)
