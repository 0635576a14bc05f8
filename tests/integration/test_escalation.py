"""Escalation in a real daemon: retries exhausted (or escalateAfter reached) → the fallback agent runs the task."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from polpo.config import load_config
from tests.support.daemon import mission_json, running_daemon, submit, write_config

pytestmark = pytest.mark.anyio

AGENTS = """
[agents.junior]
type = "command"
command = ["bash", "-c", "echo junior >> runs.log; exit 1"]

[agents.senior]
type = "command"
command = ["bash", "-c", "echo senior >> runs.log; echo done > out.txt"]
"""


def task(**policy: object) -> dict[str, object]:
    return {"title": "build", "description": "make out.txt", "assignTo": "junior", "maxRetries": 2,
            "maxFixAttempts": 1, "retryPolicy": policy,
            "expectations": [{"type": "file_exists", "path": "out.txt"}]}


async def test_fallback_agent_runs_after_retries_are_exhausted(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, agents=AGENTS))
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "esc.json", mission_json(task(fallbackAgent="senior")))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    runs = (cfg.state_dir / "workspaces" / "esc" / "runs.log").read_text().split()
    assert runs == ["junior", "junior", "junior", "senior"]  # 1 run + 2 retries, then the escalation
    esc = w.of("escalation:triggered")
    assert len(esc) == 1
    assert esc[0].data == {"level": 1, "handler": "agent", "target": "senior", "agent": "senior", "model": None}
    con = sqlite3.connect(cfg.db_path)
    assert [r[0] for r in con.execute("SELECT agent FROM attempts ORDER BY number")] == [
        "junior", "junior", "junior", "senior"]
    assert con.execute("SELECT escalation_level FROM tasks").fetchone()[0] == 1


async def test_escalate_after_switches_within_the_retry_budget(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, agents=AGENTS))
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "after.json", mission_json(task(fallbackAgent="senior", escalateAfter=1)))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    runs = (cfg.state_dir / "workspaces" / "after" / "runs.log").read_text().split()
    assert runs == ["junior", "senior"]
    assert [e.data["attempt"] for e in w.of("task:retry")] == [1]


async def test_a_task_without_escalation_fails_after_its_budget(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, agents=AGENTS))
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "none.json", mission_json(task()))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "failed"
    assert not w.of("escalation:triggered")
    runs = (cfg.state_dir / "workspaces" / "none" / "runs.log").read_text().split()
    assert runs == ["junior"] * 3
