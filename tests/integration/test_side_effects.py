"""sideEffects tasks never re-run on their own: a failure waits for `polpo approve`, then the fix runs."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import anyio
import pytest

from polpo.config import load_config
from tests.support.daemon import mission_json, run_cli, running_daemon, shell_task, submit, write_config

pytestmark = pytest.mark.anyio


async def test_failure_blocks_until_approved_then_the_fix_runs(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path))
    script = 'echo "$POLPO_ATTEMPT" >> sent.log; if [ "$POLPO_ATTEMPT" -ge 2 ]; then touch receipt; fi'
    task = shell_task("send email", script, sideEffects=True,
                      expectations=[{"type": "file_exists", "path": "receipt"}])
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "mail.json", mission_json(task))
        blocked = await w.wait_event("task:retry:blocked")
        await w.wait_for(lambda e: e.event == "task:transition" and e.data["to"] == "awaiting_approval")
        assert "polpo approve" in blocked.data["reason"]
        status = await anyio.to_thread.run_sync(lambda: run_cli("status", "--config", str(cfg.source)))
        # first what waits for a person, with the command that approves it; the task reads "waiting for approval"
        assert "waiting for you (1):" in status.stdout and "polpo approve mail:1 | polpo cancel mail" in status.stdout
        assert re.search(r"^  mail:1\s+waiting for approval\s", status.stdout, re.M), status.stdout
        # other work runs meanwhile (the dispatcher goes round many times); the blocked task is not re-run
        submit(cfg, "other.json", mission_json(shell_task("other", "true")))
        await w.wait_event("mission:completed", mission_id="other")
        log = cfg.state_dir / "workspaces" / "mail" / "sent.log"
        assert log.read_text().split() == ["1"]
        approved = await anyio.to_thread.run_sync(lambda: run_cli("approve", "mail:1", "--config", str(cfg.source)))
        assert approved.returncode == 0, approved.stderr
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    assert log.read_text().split() == ["1", "2"]
    assert w.of("task:approved")[0].data["next"] == "fix"
    con = sqlite3.connect(cfg.db_path)
    assert [r[0] for r in con.execute("SELECT kind FROM attempts WHERE task_id = 'mail:1' ORDER BY number")] == ["initial", "fix"]
