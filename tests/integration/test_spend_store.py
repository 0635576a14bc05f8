"""Spend survives a restart on every backend (memory, SQLite, PostgreSQL): what a daemon's book wrote before it
stopped is what the next daemon's book starts from, budgets' crossing flags included (so ``budget:exceeded`` is
not sent twice for one crossing), and the first state written after a start is never a reset."""

from __future__ import annotations

import pytest

from polpo.clock import FakeClock
from polpo.config import Config
from polpo.engine.spend_book import EXCEEDED, Limit, SpendBook
from polpo.mission.schema import MissionSpec
from tests.support.stores import Backend, mission, writing

pytestmark = pytest.mark.anyio

SPEC = MissionSpec.model_validate({"settings": {"budget": {"usd": 1.0}},
                                   "tasks": [{"title": "t", "description": "d", "budget": {"tokens": 500}}]})


def book(store: object, clock: FakeClock) -> SpendBook:
    cfg = Config.model_validate({"budget": {"daily_tokens": 10_000}})
    return SpendBook(cfg, store, clock)  # type: ignore[arg-type]


async def test_spend_and_its_flags_are_read_back_after_a_restart(backend: Backend) -> None:
    if backend.kind == "memory":
        pytest.skip("nothing survives a memory store (its reads are in tests/integration/test_budgets.py)")
    clock = backend.clock
    assert isinstance(clock, FakeClock)
    store = await backend.open()
    async with writing(store):
        await store.commit(store.tx().mission(mission()))  # an open mission: its accounts are loaded at start
        spend = book(store, clock)
        meter = spend.meter("m:1", "m", "coder", SPEC.tasks[0], SPEC)
        ticket = meter.admit("openai/fake-model", lambda: (100, 200))
        meter.record(ticket, "openai/fake-model", 120, 80)
        with pytest.raises(Exception, match="cannot fit the next call"):
            meter.admit("openai/fake-model", lambda: (100, 201))  # 200 spent + 301 > 500 tokens
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
