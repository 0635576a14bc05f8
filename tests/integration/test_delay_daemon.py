"""A delay on the real daemon (in this process, for its injected FakeClock) over a SQLite state folder: `PT2H`
after Build, Deploy starts when the fake clock passes two hours — not a second earlier — across a restart, with
the expiry read back from the store. The daemon's own inbox loop does the ticking (it reads the fake clock)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from polpo.clock import FakeClock
from tests.support.daemon import load, mission_json, running_daemon, shell_task, submit, write_config

pytestmark = pytest.mark.anyio

POLLS = 0.25 * 8  # seconds: several turns of the daemon's command inbox (its loop runs the timers)


async def test_a_pt2h_delay_releases_deploy_when_the_fake_clock_passes_two_hours_across_a_restart(
        tmp_path: Path) -> None:
    cfg = load(write_config(tmp_path))
    clock = FakeClock()
    doc = mission_json(shell_task("Build", "echo built > build.txt"),
                       shell_task("Deploy", "echo deployed > deploy.txt", dependsOn=["Build"]), name="soak",
                       delays=[{"name": "soak", "afterTasks": ["Build"], "blocksTasks": ["Deploy"],
                                "duration": "PT2H", "message": "let it soak"}])
    async with running_daemon(cfg, clock=clock) as (_, w):
        submit(cfg, "soak.json", doc)
        started = await w.wait_event("delay:started", mission_id="soak")
        clock.advance(3600)
        await anyio.sleep(POLLS)  # the inbox loop ran with the clock at +1 h: nothing to release
        assert w.of("delay:expired") == [] and w.of("agent:spawned", task_id="soak:2") == []
    assert started.data["expiresAt"] == "2026-01-01T02:00:00.000Z"
    con = sqlite3.connect(cfg.db_path)
    assert con.execute("SELECT status, expires_at FROM holds").fetchall() == [
        ("started", "2026-01-01T02:00:00.000Z")]
    async with running_daemon(cfg, clock=clock) as (_, w):
        clock.advance(3599)
        await anyio.sleep(POLLS)
        assert w.of("delay:expired") == [] and w.of("agent:spawned", task_id="soak:2") == []
        clock.advance(1)
        await w.wait_event("delay:expired", mission_id="soak")
        done = await w.wait_event("mission:completed", mission_id="soak")
    assert done.data["outcome"] == "completed"
    assert (cfg.state_dir / "workspaces" / "soak" / "deploy.txt").read_text() == "deployed\n"
