"""What a task's turn that raised does next (polpo.engine.dispatcher.after_error): wait out the store's outage, end
with the node's stop, or fail the task as an internal error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from polpo.clock import FakeClock
from polpo.engine.dispatcher import after_error
from polpo.model.status import StopReason, TaskStatus
from polpo.store.errors import StoreUnavailable
from polpo.store.memory import MemoryStore
from tests.support.engine import EngineRun, ScriptAgent, config, engine_on_memory

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(("outage", "ending", "status", "then"), [
    (True, False, TaskStatus.PENDING, "again"),  # nothing started: the turn is taken again from what is stored
    (True, False, TaskStatus.REVIEW, "again"),  # the result is stored: the assessment resumes
    (True, False, TaskStatus.IN_PROGRESS, "contain"),
    (True, True, TaskStatus.PENDING, "leave"),  # the node stops, or may no longer write: the task stays as stored
    (True, True, TaskStatus.IN_PROGRESS, "leave"),
    (False, True, TaskStatus.PENDING, "contain"),  # not the store's outage: the runner's bug, whatever else
    (False, False, TaskStatus.REVIEW, "contain"),
])
def test_a_turn_that_raised_waits_leaves_or_is_contained(outage: bool, ending: bool, status: TaskStatus,
                                                         then: str) -> None:
    assert after_error(outage, ending, status) == then


class AwayAtTurnStart(MemoryStore):
    """A store whose spend read meets an outage at the start of a turn, as the node is told to stop (nemesis seed
    8014: PostgreSQL killed, the node stopping because its lease could not be renewed)."""

    on_read: Any = None

    async def spend_now(self, *args: Any, **kwargs: Any) -> Any:
        if self.on_read is not None:
            self.on_read()
            self.on_read = None  # once
            raise StoreUnavailable("connection reset by peer")
        return await super().spend_now(*args, **kwargs)


async def test_a_turn_whose_read_meets_the_store_away_as_the_node_stops_ends_without_an_internal_error(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = AwayAtTurnStart(FakeClock())
    agent = ScriptAgent()
    holder: dict[str, EngineRun] = {}

    def stop_it() -> None:
        for task_id in list(holder["run"].engine.dispatcher.running):
            holder["run"].engine.dispatcher.stop_task(task_id, StopReason.SHUTDOWN)
    store.on_read = stop_it
    async with engine_on_memory(config(tmp_path), agents={"fake": agent}, store=store, stop=False) as run:
        holder["run"] = run
        m = await run.accept({"tasks": [{"title": "a", "description": "d", "assignTo": "fake",
                                         "budget": {"tokens": 1000}}]})  # a budget: the turn reads its spend
        with anyio.fail_after(10):
            while store.on_read is not None or run.engine.dispatcher.running:
                await anyio.sleep(0.02)
    assert not [r for r in caplog.records if "internal error" in r.getMessage()]
    assert agent.requests == [] and run.engine.board.tasks[f"{m.id}:1"].status == TaskStatus.PENDING  # as stored
    assert not run.of("task:transition", to="failed")
