"""A violated task that a database outage kept from failing (``violation_action = "fail"``) fails at the next
check: its violation mark is written at once, so the check itself would never find it again."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from polpo.agents.base import AgentRequest
from polpo.engine.sla import SlaKeeper
from polpo.model.records import Task
from polpo.model.status import TaskStatus
from tests.support.engine import ScriptAgent, config, engine_on_memory

pytestmark = pytest.mark.anyio


async def test_a_violated_task_an_outage_kept_from_failing_fails_at_the_next_check(tmp_path: Path) -> None:
    cfg = config(tmp_path, '[sla]\nviolation_action = "fail"\ncheck_interval = 3600\n', retries=0, fixes=0)
    release = anyio.Event()

    async def hold(_r: AgentRequest) -> int:
        await release.wait()
        return 0

    async with engine_on_memory(cfg, agents={"fake": ScriptAgent(hold)}) as run:
        m = await run.accept({"name": "s", "tasks": [
            {"title": "A", "assignTo": "fake", "description": "a"},
            {"title": "B", "assignTo": "fake", "description": "b", "dependsOn": ["A"], "deadline": "PT10S"}]})
        await run.wait_event("agent:spawned")
        b = m.task_by_title("B")
        assert b is not None
        tries: list[str] = []

        async def fail_through_an_outage(t: Task) -> None:  # the first try meets a restarting database
            tries.append(t.id)
            if len(tries) == 1:
                raise ConnectionRefusedError(111, "Connection refused")
            await run.engine.commands.fail_for_sla(t)

        keeper = SlaKeeper(cfg.sla, run.store, run.engine.board, fail_through_an_outage)
        run.clock.advance(11)
        await keeper.check(run.clock.now())
        assert b.status is TaskStatus.PENDING and "violated" in keeper.marks[b.id]
        await keeper.check(run.clock.now())
        assert b.status is TaskStatus.FAILED and tries == [b.id, b.id]
        assert keeper.unfailed == {}
        release.set()
