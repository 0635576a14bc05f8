"""Budgets across nodes that share one store (memory, PostgreSQL; SQLite is one node's): every node's calls count.

Two daemons' books on one database, as a cluster runs them: the tasks of one mission on both nodes, a task retried
on the node that did not run its first attempt, and the day's accounts. Each book starts before the other spends
anything, so what one knows of the other's calls it can only have read from the store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import pytest

from polpo.config import Config
from polpo.engine.spend_book import EXCEEDED, SpendBook
from polpo.engine.spend_rules import Limit
from polpo.llm.spend import BudgetRefused
from polpo.mission.schema import MissionSpec
from polpo.store.core import StoreCore
from polpo.store.memory import MemoryStore
from tests.support.stores import Backend, mission, writing

pytestmark = pytest.mark.anyio

SPEC = MissionSpec.model_validate({
    "settings": {"budget": {"tokens": 1000}},
    "tasks": [{"title": "a", "description": "d", "budget": {"tokens": 400}},
              {"title": "b", "description": "d"}]})
FREE = MissionSpec.model_validate({"tasks": [{"title": "c", "description": "d"}]})  # only the day's budget
MODEL = "openai/fake-model"
CFG = Config.model_validate({"budget": {"daily_tokens": 1500}})


@asynccontextmanager
async def two_nodes(backend: Backend) -> AsyncIterator[tuple[StoreCore, StoreCore]]:
    if backend.kind == "sqlite":
        pytest.skip("a SQLite store is one daemon's: nodes share PostgreSQL (or, in tests, a memory database)")
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(writing(await backend.open()))
        if backend.kind == "memory":
            assert isinstance(a, MemoryStore)
            b: StoreCore = MemoryStore(backend.clock, a.db)  # the memory store's second node: the same database
        else:
            b = await backend.open()
        await stack.enter_async_context(writing(b))
        await a.commit(a.tx().mission(mission("m")))
        yield a, b


async def spend(book: SpendBook, task_id: str, idx: int, tokens_in: int, tokens_out: int,
                spec: MissionSpec = SPEC) -> None:
    """One call of ``task_id``'s turn, estimated at what it then uses; flushed, so the other node can read it."""
    meter = await book.open_meter(task_id, "m", "coder", spec.tasks[idx], spec)
    ticket = await meter.admit(MODEL, lambda: (tokens_in, tokens_out))
    meter.record(ticket, MODEL, tokens_in, tokens_out, None)
    meter.close()
    await book.store.flush()


async def test_a_mission_budget_and_a_task_budget_count_every_nodes_calls(backend: Backend) -> None:
    async with two_nodes(backend) as (a, b):
        one, two = SpendBook(CFG, a, backend.clock), SpendBook(CFG, b, backend.clock)
        await one.load()
        await two.load()
        await spend(one, "m:1", 0, 200, 100)  # node one: task 1's first attempt, 300 tokens
        await spend(two, "m:2", 1, 300, 200)  # node two: task 2, 500 tokens
        [row] = [r for r in await b.spend_now("m", None) if r["scope"] == "mission"]
        assert (row["tokens_in"], row["tokens_out"], row["calls"]) == (500, 300, 2)  # both nodes' calls, summed

        # task 1 retried on node two: its first attempt's 300 tokens count against its 400
        meter = await two.open_meter("m:1", "m", "coder", SPEC.tasks[0], SPEC)
        with pytest.raises(BudgetRefused, match="task m:1 budget cannot fit"):
            await meter.admit(MODEL, lambda: (100, 50))
        meter.close()

        # the mission's 1000: node one has seen only its own 300, node two's 500 are in the store
        meter = await one.open_meter("m:2", "m", "coder", SPEC.tasks[1], SPEC)
        with pytest.raises(BudgetRefused, match="mission m budget cannot fit"):
            await meter.admit(MODEL, lambda: (150, 100))
        meter.close()


async def test_the_days_budget_is_the_clusters(backend: Backend) -> None:
    """The daemon's daily budget counts every node's calls of the day; a node learns that another spent it at its
    next turn and holds its new work until the day ends."""
    async with two_nodes(backend) as (a, b):
        one, two = SpendBook(CFG, a, backend.clock), SpendBook(CFG, b, backend.clock)
        await one.load()
        await two.load()
        await spend(one, "m:1", 0, 600, 200, FREE)
        await spend(two, "m:1", 0, 400, 200, FREE)  # 1400 of the day's 1500, across two nodes
        meter = await one.open_meter("m:1", "m", "coder", FREE.tasks[0], FREE)
        with pytest.raises(BudgetRefused, match="the daemon's daily budget cannot fit"):
            await meter.admit(MODEL, lambda: (100, 100))
        meter.close()
        await a.flush()
        assert two.paused_key("coder") is None  # node two has not read the crossing yet
        (await two.open_meter("m:1", "m", "coder", FREE.tasks[0], FREE)).close()
        assert two.paused_key("coder") == "budget:daemon:"
        day = two.today()
        assert two.accounts[("daemon", "", day)].flags & EXCEEDED
        [row] = [r for r in await a.spend_now(None, day) if r["scope"] == "daemon"]
        assert (row["tokens_in"] + row["tokens_out"], row["calls"]) == (1400, 2)


async def test_a_raised_budget_reaches_the_node_that_runs_the_retry_and_a_stale_read_does_not_undo_it(
        backend: Backend) -> None:
    """`polpo retry TASK --budget` on the leader: the node that runs the retry (another one, or the leader
    itself before the raise is stored) works under the raised budget, its crossings cleared."""
    async with two_nodes(backend) as (a, b):
        leader, worker = SpendBook(CFG, a, backend.clock), SpendBook(CFG, b, backend.clock)
        await spend(worker, "m:1", 0, 300, 50)  # task 1's first attempt on the worker: 350 of its 400
        meter = await worker.open_meter("m:1", "m", "coder", SPEC.tasks[0], SPEC)
        with pytest.raises(BudgetRefused):
            await meter.admit(MODEL, lambda: (100, 100))  # the next call does not fit: the task's budget is spent
        meter.close()
        await b.flush()
        assert worker.spent_fixed(worker.meter("m:1", "m", "coder", SPEC.tasks[0], SPEC)) is not None

        await leader.load()
        leader.raise_task("m:1", "m", Limit(None, 900))  # submitted; the leader's turn reads before it is stored
        here = await leader.open_meter("m:1", "m", "coder", SPEC.tasks[0], SPEC)
        assert here.limits[0] == Limit(None, 900) and leader.spent_fixed(here) is None
        here.close()
        await a.flush()

        there = await worker.open_meter("m:1", "m", "coder", SPEC.tasks[0], SPEC)  # the retry runs on the worker
        assert there.limits[0] == Limit(None, 900) and worker.spent_fixed(there) is None
        ticket = await there.admit(MODEL, lambda: (100, 100))  # 350 + 200 fits the raised 900
        there.record(ticket, MODEL, 100, 100, None)
        there.close()
        await b.flush()
        [row] = [r for r in await a.spend_now("m", None) if r["scope"] == "task" and r["key"] == "m:1"]
        assert (row["tokens_in"] + row["tokens_out"], row["limit_tokens"], row["flags"] // 4) == (550, 900, 1)
