"""A task its budget stops at a turn boundary ends cleanly, even when its end finishes the mission at once."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from polpo.agents.base import AgentRequest, AgentResult
from polpo.llm.spend import CURRENT_METER, BudgetRefused
from tests.support.engine import ScriptAgent, config, engine_on_memory, result

pytestmark = pytest.mark.anyio


def over_budget() -> ScriptAgent:
    """An agent whose next model call does not fit its task's budget: refused by the turn's meter, it stops at that
    turn boundary (as the LLM agent's loop does)."""
    async def act(_r: AgentRequest) -> AgentResult:
        meter = CURRENT_METER.get()
        assert meter is not None
        with contextlib.suppress(BudgetRefused):
            await meter.admit("model-x", lambda: (5000, 5000))
        return result(0)
    return ScriptAgent(act)


async def test_the_last_task_stopped_by_its_budget_releases_its_workspace_after_its_mission_ended(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Nemesis seed 7031: the budget's end of the mission's last task finished the mission, which left memory; the
    workspace's release then looked the agent up through the mission and failed the turn as an internal error."""
    async with engine_on_memory(config(tmp_path), agents={"fake": over_budget()}) as run:
        m = await run.accept({"tasks": [{"title": "a", "description": "do a", "assignTo": "fake",
                                         "budget": {"tokens": 1000}}]})
        done = await run.wait_event("mission:completed", mission_id=m.id)
    [ended] = run.of("task:transition", to="failed")
    assert ended.data["trigger"] == "budget"
    assert done.data["outcome"] == "failed"
    assert not [r for r in caplog.records if "internal error" in r.getMessage()]
