"""Checkpoints and delays with several engines on one store (the in-memory cluster: real engines, the shared
claim queue): the leader decides a checkpoint once, a worker node runs the tasks, and after the leader dies the
newly elected one reads the checkpoint back — reached, not reached again — and releases it on `resume`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio.lowlevel
import pytest

from polpo.command_args import encode
from tests.support.engine import ScriptAgent, config
from tests.support.memory_cluster import memory_cluster

pytestmark = pytest.mark.anyio


def t(title: str, **fields: Any) -> dict[str, Any]:
    return {"title": title, "description": f"do {title}", "assignTo": "fake", **fields}


async def test_a_checkpoint_is_decided_once_by_the_leader_and_survives_its_death(tmp_path: Path) -> None:
    ran: list[tuple[str, str]] = []

    def agent(node: str) -> ScriptAgent:
        return ScriptAgent(lambda r: ran.append((node, r.title)) or 0)

    async with memory_cluster(config(tmp_path)) as c:
        await c.add("L", {"fake": agent("L")}, dispatch=False)  # the leader decides; it runs nothing
        await c.add("W", {"fake": agent("W")})
        await c.lead("L")
        m = await c.accept("L", {"tasks": [t("Build"), t("Deploy", dependsOn=["Build"])],
                                 "settings": {"affinity": "any"},
                                 "checkpoints": [{"name": "go-live", "afterTasks": ["Build"],
                                                  "blocksTasks": ["Deploy"]}]})
        reached = await c.wait_event("checkpoint:reached", mission_id=m.id)
        c.crash("L")
        await c.lead("W")
        for _ in range(50):
            await anyio.lowlevel.checkpoint()
        assert ran == [("W", "Build")]  # Deploy waits on the new leader too
        status, answer = await c.nodes["W"].engine.commands.apply("resume", encode(m.id, by="ada"))
        assert status == "done", answer
        done = await c.wait_event("mission:completed", mission_id=m.id)
    assert reached.node == "L" and done.data["outcome"] == "completed"
    assert len(c.of("checkpoint:reached")) == 1 and c.of("checkpoint:resumed")[0].node == "W"
    assert ran == [("W", "Build"), ("W", "Deploy")]
