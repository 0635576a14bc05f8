"""A node that may no longer write (fenced: its lease is gone) while a person's command is queued: the command
inbox ends quietly and leaves the command for the next leader (nemesis seed 4137: a node fenced while answering
a command ended the daemon with a traceback instead of its one-line reason)."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest

from tests.support.engine import ScriptAgent, config, engine_on_memory

pytestmark = pytest.mark.anyio


async def test_the_inbox_of_a_fenced_node_ends_quietly_and_leaves_the_command(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Reads still answer a fenced node; its answer to the command is the write it may not make."""
    async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent()}, stop=False) as run:
        cid = run.store.queue_command("cancel", "no-such-mission")
        run.store.fence("node a (incarnation x) no longer holds its lease")
        with caplog.at_level(logging.WARNING, logger="polpo.commands"), anyio.fail_after(10):
            await run.engine.commands.run_inbox(0.01)  # returns: no exception ends the daemon
    assert not [r for r in caplog.records if r.name == "polpo.commands" and r.exc_info], caplog.records
    assert [r["status"] for r in run.store.rows("commands", lambda r: r["id"] == cid)] == ["queued"]
