"""A node that cannot reach an "affinity": "any" mission's workspace (another node's state folder) gives its task
back with the reason and never runs it; a node that can runs it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from polpo.agents.base import AgentRequest
from polpo.mission.security import unreachable
from tests.support.engine import ScriptAgent, config
from tests.support.memory_cluster import memory_cluster

pytestmark = pytest.mark.anyio


async def test_a_node_gives_back_a_task_whose_workspace_it_cannot_reach(tmp_path: Path) -> None:
    runs: list[tuple[str, str]] = []

    def agent(node: str) -> ScriptAgent:
        def act(r: AgentRequest) -> int:
            runs.append((node, r.workspace.name))
            return 0
        return ScriptAgent(act)

    async with memory_cluster(config(tmp_path / "l")) as c:
        leader = await c.add("L", {"fake": agent("L")}, dispatch=False)
        worker = await c.add("W", {"fake": agent("W")}, cfg=config(tmp_path / "w"))
        await c.lead("L")
        m = await c.accept("L", {"tasks": [{"title": "t", "description": "d", "assignTo": "fake"}],
                                 "settings": {"affinity": "any"}})
        refused = await c.wait_event("workspace:unreachable", mission_id=m.id)
        assert refused.data["node"] == "W" and str(tmp_path / "l") in refused.data["workspace"]
        assert "not below node W's workspace roots" in refused.data["reason"]
        assert worker.queue.skip == {m.id} and runs == []
        [claim] = [r for r in c.db.claims.rows.values() if r["task_id"] == f"{m.id}:1"]
        assert claim["node"] is None  # back in the queue, for a node that can reach it
        assert leader.tg is not None
        leader.tg.start_soon(leader.engine.run, leader.tg)
        with anyio.fail_after(10):
            await c.wait_event("mission:completed", mission_id=m.id)
        assert runs == [("L", m.workspace.name)]


def test_unreachable_says_why(tmp_path: Path) -> None:
    roots = [tmp_path / "state" / "workspaces"]
    (roots[0] / "m").mkdir(parents=True)
    assert unreachable(roots[0] / "m", roots, "n1") is None
    assert "is not there on node n1" in (unreachable(roots[0] / "gone", roots, "n1") or "")
    assert "not below node n1's workspace roots" in (unreachable(tmp_path / "other", roots, "n1") or "")
