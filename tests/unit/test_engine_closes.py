"""An engine that ran and stopped leaves no queue of its own open (anyio warns of each one it collects)."""

from __future__ import annotations

import gc
import re
import warnings
from pathlib import Path

import pytest
from anyio.streams.memory import MemoryObjectSendStream

from tests.support.engine import ScriptAgent, config, engine_on_memory

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_stopped_engine_leaves_no_memory_stream_unclosed(tmp_path: Path) -> None:
    earlier = {id(o) for o in gc.get_objects() if isinstance(o, MemoryObjectSendStream)}  # other tests' streams
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent()}) as run:
            m = await run.accept({"tasks": [{"title": "t", "description": "d", "assignTo": "fake"}]})
            await run.wait_event("mission:completed", mission_id=m.id)
        del run
        gc.collect()
    found = (re.search(r"Unclosed <MemoryObject\w+ at ([0-9a-f]+)>", str(w.message)) for w in seen
             if issubclass(w.category, ResourceWarning))
    unclosed = [f.group(0) for f in found if f is not None and int(f.group(1), 16) not in earlier]
    assert unclosed == []
