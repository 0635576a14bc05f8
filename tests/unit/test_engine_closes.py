"""An engine that ran and stopped leaves no queue of its own open (anyio warns of each one it collects)."""

from __future__ import annotations

import gc
import warnings
from pathlib import Path

import pytest

from tests.support.engine import ScriptAgent, config, engine_on_memory

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_stopped_engine_leaves_no_memory_stream_unclosed(tmp_path: Path) -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent()}) as run:
            m = await run.accept({"tasks": [{"title": "t", "description": "d", "assignTo": "fake"}]})
            await run.wait_event("mission:completed", mission_id=m.id)
        del run
        gc.collect()
    unclosed = [str(w.message) for w in seen if issubclass(w.category, ResourceWarning) and "MemoryObject" in
                str(w.message)]
    assert unclosed == []
