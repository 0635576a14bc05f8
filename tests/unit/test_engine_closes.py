"""An engine that ran and stopped leaves no queue of its own open (anyio warns of each one it collects).

Run in a fresh interpreter: in the test process, the streams other tests left behind are collected at any time.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import gc, sys, tempfile, warnings
from pathlib import Path
import anyio
from tests.support.engine import ScriptAgent, config, engine_on_memory

async def main() -> None:
    async with engine_on_memory(config(Path(tempfile.mkdtemp())), agents={"fake": ScriptAgent()}) as run:
        m = await run.accept({"tasks": [{"title": "t", "description": "d", "assignTo": "fake"}]})
        await run.wait_event("mission:completed", mission_id=m.id)

with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always", ResourceWarning)
    anyio.run(main)
    gc.collect()
for w in seen:
    if issubclass(w.category, ResourceWarning):
        print(w.message)
"""


def test_a_stopped_engine_leaves_no_memory_stream_unclosed() -> None:
    r = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 0, r.stderr
    assert [line for line in r.stdout.splitlines() if "MemoryObject" in line] == []
