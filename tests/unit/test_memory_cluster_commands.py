"""A person's command and a leader that lost its lock without noticing: what it decides for the command is not
written (the database refuses the batch for the lock alone), the command stays queued, and the next leader applies
it once — it does not answer a command whose effect was dropped, nor leave the store out of step with itself."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from polpo.agents.base import AgentRequest
from tests.support.engine import ScriptAgent, config
from tests.support.memory_cluster import memory_cluster

pytestmark = pytest.mark.anyio


async def test_a_command_a_deposed_leader_applied_is_applied_once_by_the_next(tmp_path: Path) -> None:
    runs: list[tuple[str, str]] = []

    def agent(node: str) -> ScriptAgent:
        def act(r: AgentRequest) -> int:
            runs.append((node, r.title))
            return 1 if len(runs) == 1 else 0  # the first run fails; a retry passes
        return ScriptAgent(act)

    async with memory_cluster(config(tmp_path, retries=0, fixes=0)) as c:
        first = await c.add("L", {"fake": agent("L")})
        await c.add("W", {"fake": agent("W")}, dispatch=False)
        await c.lead("L")
        m = await c.accept("L", {"tasks": [{"title": "build", "description": "d", "assignTo": "fake"}],
                                 "settings": {"affinity": "any"}})
        await c.wait_event("mission:completed", mission_id=m.id)
        c.lose_lock("L")  # L still believes it leads
        cid = c.db.queue_command("retry", f"{m.id}:1")
        for _ in range(500):  # L's inbox applies it; the store refuses L's decisions for the lock
            if first.store.term == 0:
                break
            await anyio.sleep(0.01)
        await first.store.flush()
        assert first.store.term == 0
        [cmd] = c.rows("commands", id=cid)
        assert cmd["status"] == "queued"  # not answered: its effect was not written
        assert not c.of("task:retry") and not c.of("mission:resumed")
        [task] = c.rows("tasks", id=f"{m.id}:1")
        assert task["status"] == "failed"
        c.depose("L")
        await c.lead("W")
        with anyio.fail_after(10):
            while len(c.of("mission:completed", mission_id=m.id)) < 2:
                await anyio.sleep(0.01)
    [cmd] = c.rows("commands", id=cid)
    assert (cmd["status"], cmd["result"]) == ("done", f"retrying {m.id}:1")
    assert [e.node for e in c.of("task:retry")] == ["W"] and [e.node for e in c.of("mission:resumed")] == ["W"]
    assert [e.data["outcome"] for e in c.of("mission:completed", mission_id=m.id)] == ["failed", "completed"]
    assert len(runs) == 2
