"""Spend in a cluster: the mission's report, written by the node that leads it, counts the LLM calls of the turns
other nodes ran (their attempts' tokens and cost are in the shared store, not in the leader's memory)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from polpo.agents.base import AgentRequest, AgentResult
from tests.support.engine import ScriptAgent, config, result
from tests.support.memory_cluster import memory_cluster

pytestmark = pytest.mark.anyio


def spending(node: str) -> ScriptAgent:
    """An agent whose every turn used 100 tokens in and 40 out of ``model-<node>``, for $0.01."""
    def act(_r: AgentRequest) -> AgentResult:
        return replace(result(0), model=f"model-{node}", tokens=140, tokens_in=100, tokens_out=40, cost=0.01)
    return ScriptAgent(act)


async def test_the_report_counts_the_spend_of_tasks_another_node_ran(tmp_path: Path) -> None:
    async with memory_cluster(config(tmp_path)) as c:
        await c.add("L", {"fake": spending("L")}, dispatch=False)  # the leader decides; it runs nothing
        await c.add("W", {"fake": spending("W")})
        await c.lead("L")
        tasks = [{"title": n, "description": f"do {n}", "assignTo": "fake"} for n in ("a", "b", "c")]
        m = await c.accept("L", {"tasks": tasks, "settings": {"affinity": "any"}})
        done = await c.wait_event("mission:completed", mission_id=m.id)
    assert done.node == "L" and {e.node for e in c.of("agent:spawned")} == {"W"}
    spend = done.data["report"]["spend"]
    assert spend["total"] == {"tokensIn": 300, "tokensOut": 120, "usd": 0.03}
    assert spend["byModel"] == {"model-W": {"tokensIn": 300, "tokensOut": 120, "usd": 0.03}}
    assert set(spend["byTask"]) == {f"{m.id}:1", f"{m.id}:2", f"{m.id}:3"}
