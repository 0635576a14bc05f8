"""A node that can no longer write (fenced, or its database gone) leaves the mission file it was taking in for the
next leader: nothing is rejected for it, and no internal error is logged (found by the nemesis: a fenced leader
logged a traceback and rejected the file it met while leaving)."""

from __future__ import annotations

import logging
from pathlib import Path

import orjson
import pytest

from polpo.intake.handler import IntakeHandler
from tests.support.engine import ScriptAgent, config, engine_on_memory

pytestmark = pytest.mark.anyio


async def test_a_file_met_while_fenced_is_left_not_rejected(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    doc = {"name": "m", "tasks": [{"title": "A", "description": "a", "assignTo": "fake"}]}
    async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent()}, stop=False) as run:
        run.store.fence("node a (incarnation x) no longer holds its lease")
        handler = IntakeHandler(run.engine.admission, known_agents=run.engine.agents.known_names(), channels=None)
        with caplog.at_level(logging.ERROR, logger="polpo.intake"):
            assert await handler(tmp_path / "m.json", orjson.dumps(doc)) == "lost"
    assert not [r for r in caplog.records if r.name == "polpo.intake"]
    assert not [e for e in run.events if e.event in ("mission:rejected", "mission:accepted")]
