"""``metric`` checks in a real daemon (in this process: real SQLite, real watched folder, real bash for the agent
and for every measurement): bounds with the fix loop told the number, a baseline measured once before the agent
and reused by every fix, a baseline that cannot be measured failing the task before its agent (and measured
again after ``polpo retry``), and metrics in tiers and as a gate's input."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from polpo.config import Config, load_config
from tests.support.daemon import mission_json, running_daemon, shell_task, submit, write_config

pytestmark = pytest.mark.anyio

FIX_OR_NOT = 'if [ "$POLPO_ATTEMPT_KIND" = fix ]; then echo {fixed} > {file}; else echo {first} > {file}; fi'
LOGGED = 'echo "$POLPO_METRIC_PHASE" >> phases.log; cat cov.txt'  # each measurement says when it ran


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return load_config(write_config(tmp_path))


def rows(cfg: Config, sql: str, *args: Any) -> list[sqlite3.Row]:
    con = sqlite3.connect(cfg.db_path)
    con.row_factory = sqlite3.Row
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


async def test_bounds_fail_with_the_number_the_fix_is_told_and_pass_once_it_is_within(cfg: Config) -> None:
    metric = {"type": "metric", "name": "score", "command": "cat score.txt", "min": 45, "max": 50}
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "score.json", mission_json(shell_task(
            "score", FIX_OR_NOT.format(fixed=47, first=42, file="score.txt"), expectations=[metric]), name="score"))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    checks = w.of("assessment:check:complete")
    assert [c.data["passed"] for c in checks] == [False, True]
    first = checks[0].data
    assert first["message"] == "score = 42: below the minimum 45; at most the maximum 50"
    assert first["metric"] == {"value": 42.0, "min": 45.0, "max": 50.0, "line": "42"}
    assert checks[1].data["metric"]["value"] == 47.0
    fix_prompt = rows(cfg, "SELECT prompt FROM attempts WHERE task_id = 'score:1' AND number = 2")[0]["prompt"]
    assert "metric: score = 42: below the minimum 45" in fix_prompt  # the next attempt is told the number
    stored = rows(cfg, "SELECT details, scores FROM checks WHERE task_id = 'score:1' ORDER BY assessment_id")
    assert stored[0]["details"] == "read from the line: 42"
    assert json.loads(stored[1]["scores"])["metric"]["value"] == 47.0
    assert not w.of("assessment:judged")  # no expectation judge configured, and none asked about a metric


async def test_the_baseline_is_measured_once_before_the_agent_and_every_fix_is_compared_with_it(
        cfg: Config) -> None:
    metric = {"type": "metric", "name": "coverage", "command": LOGGED, "baseline": "before", "min": 60}
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "cov.json", mission_json(
            shell_task("write", "echo 80 > cov.txt"),
            shell_task("refactor", FIX_OR_NOT.format(fixed=85, first=70, file="cov.txt"), dependsOn=["write"],
                       expectations=[metric]), name="cov"))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    ws = cfg.state_dir / "workspaces" / "cov"
    assert (ws / "phases.log").read_text().split() == ["before", "after", "after"]  # once, then each attempt
    [baseline] = w.of("assessment:check:baseline")
    assert baseline.task_id == "cov:2"
    assert baseline.data == {"index": 0, "label": "coverage", "attempt": 1, "value": 80.0, "line": "80",
                             "duration": baseline.data["duration"]}
    spawned = w.of("agent:spawned", task_id="cov:2")[0]
    assert baseline.seq < spawned.seq  # stored before the agent started
    checks = w.of("assessment:check:complete", task_id="cov:2")
    assert [(c.data["passed"], c.data["metric"]["value"], c.data["metric"]["baseline"]) for c in checks] == [
        (False, 70.0, 80.0), (True, 85.0, 80.0)]
    assert checks[0].data["message"] == ("coverage = 70: at least the minimum 60; worse than 80 before the task "
                                         "(higher is better)")
    [row] = rows(cfg, "SELECT * FROM baselines")
    assert (row["task_id"], row["check_idx"], row["value"]) == ("cov:2", 0, 80.0)
    assert json.loads(row["data"])["attempt"] == 1


async def test_a_baseline_that_cannot_be_measured_fails_the_task_unstarted_and_a_retry_measures_again(
        cfg: Config) -> None:
    metric = {"type": "metric", "name": "coverage", "command": "cat cov.txt", "baseline": "before"}
    async with running_daemon(cfg) as (daemon, w):
        submit(cfg, "nob.json", mission_json(shell_task("t", "echo 12 > cov.txt", expectations=[metric]),
                                             name="nob"))
        first = await w.wait_event("mission:completed")
        assert first.data["outcome"] == "failed"
        assert not w.of("agent:spawned")  # nothing ran, nothing was spent
        [event] = w.of("assessment:check:baseline")
        assert event.data["value"] is None and event.data["problem"] == "the command failed (exit 1)"
        failed = w.of("task:transition", to="failed")[0]
        assert (failed.data["from"], failed.data["trigger"]) == ("assigned", "no_baseline")
        assert "the baseline of metric #1 (coverage) could not be measured before the agent started" \
               in failed.data["reason"] and "`polpo retry nob:1` measures it again" in failed.data["reason"]
        [attempt] = rows(cfg, "SELECT * FROM attempts WHERE task_id = 'nob:1'")
        assert attempt["permanent"] == 1 and "No such file" in attempt["stderr_tail"]

        (cfg.state_dir / "workspaces" / "nob" / "cov.txt").write_text("10\n")  # the "before" exists now
        assert daemon.engine is not None
        assert (await daemon.engine.commands.apply("retry", "nob:1"))[0] == "done"
        await w.wait_for(lambda e: e.event == "mission:completed" and e.data["outcome"] == "completed")
    assert [e.data["value"] for e in w.of("assessment:check:baseline")] == [None, 10.0]
    [check] = w.of("assessment:check:complete")
    assert check.data["passed"] and check.data["message"] == "coverage = 12: better than 10 before the task " \
                                                             "(higher is better)"


async def test_metrics_decide_tiers_and_a_failed_one_fails_a_gate(cfg: Config) -> None:
    """Seed 004's cascade: a build, coverage preserved (rejecting), coverage improved (accepting: the review never
    runs), then the review; a task that lowers coverage is rejected by the preservation tier, and the gate that
    requires it blocks the task after it."""
    tiers = [
        {"name": "build", "policy": "REJECT_ON_ANY_FAIL", "expectations": [{"type": "test", "command": "true"}]},
        {"name": "coverage-preservation", "policy": "REJECT_ON_ANY_FAIL",
         "expectations": [{"type": "metric", "name": "coverage", "command": "cat cov.txt", "baseline": "before"}]},
        {"name": "coverage-improvement", "policy": "ACCEPT_ON_ALL_PASS",
         "expectations": [{"type": "metric", "name": "coverage", "command": "cat cov.txt", "min": 90}]},
        {"name": "test-quality", "policy": "FINAL_TIER",
         "expectations": [{"type": "llm_review", "criteria": "The tests are good."}]},
    ]
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "tiers.json", mission_json(
            shell_task("start", "echo 80 > cov.txt"),
            shell_task("improve", "echo 95 > cov.txt", dependsOn=["start"], tiers=tiers),
            shell_task("lower", "echo 70 > cov.txt", dependsOn=["improve"], tiers=tiers, maxRetries=0,
                       maxFixAttempts=0),
            shell_task("ship", "true", dependsOn=["lower"]),
            name="tiers", qualityGates=[{"name": "coverage kept", "afterTasks": ["lower"], "blocksTasks": ["ship"],
                                         "requireAllPassed": True}]))
        done = await w.wait_event("mission:completed")
    assert done.data["report"]["tasks"] == {"total": 4, "done": 2, "failed": 2}
    improved = w.of("assessment:complete", task_id="tiers:2")[0].data
    assert improved["passed"] and improved["tier"] == "coverage-improvement"  # accepted: no judge was needed
    lowered = w.of("assessment:complete", task_id="tiers:3")[0].data
    assert not lowered["passed"] and lowered["tier"] == "coverage-preservation"
    assert "coverage = 70: worse than 95 before the task (higher is better)" in lowered["message"]
    assert [c.data["tier"] for c in w.of("assessment:check:complete", task_id="tiers:3")] == [
        "build", "coverage-preservation"]
    assert w.of("quality:gate:failed") and w.of("task:transition", task_id="tiers:4", to="failed")
