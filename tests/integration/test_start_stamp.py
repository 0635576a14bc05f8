"""A running agent's attempt carries its leader's start time, stamped a moment after the spawn (once the exec is
over, so the event loop never waits for it): what tells the leader from a later process with its pid when a
daemon that crashed looks for its orphans. A real daemon, a real ``sleep``, the store read as the CLI reads it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from polpo.config import load_config
from polpo.store import read
from polpo.tools.proctable import process_start_ticks
from tests.support.daemon import mission_json, running_daemon, shell_task, submit, write_config

pytestmark = pytest.mark.anyio


async def test_a_running_agents_attempt_is_stored_with_its_leaders_start_time(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path))
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "slow.json", mission_json(shell_task("slow", "sleep 30")))
        spawned = await w.wait_event("agent:spawned", task_id="slow:1")
        pid = spawned.data["pid"]
        ticks = process_start_ticks(pid)
        assert ticks is not None  # the agent runs
        con = read.connect(cfg.db_path)
        try:
            with anyio.fail_after(10):  # stamped STAMP_AFTER (5 ms) after the spawn, then written with the next batch
                while (row := read.attempts(con, "slow:1")[0])["pid_ticks"] is None:
                    await anyio.sleep(0.01)
        finally:
            con.close()
        assert (row["pid"], row["pid_ticks"], row["status"]) == (pid, ticks, "running")
