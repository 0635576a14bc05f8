"""A real daemon in this process: real SQLite, real watchfiles events, real subprocess agents."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import anyio
import pytest

from polpo.config import load_config
from tests.support.daemon import mission_json, running_daemon, shell_task, submit, write_config
from tests.support.procs import dies

pytestmark = pytest.mark.anyio


@pytest.fixture
def cfg(tmp_path: Path):  # type: ignore[no-untyped-def]
    return load_config(write_config(tmp_path))


def _db(cfg) -> sqlite3.Connection:  # type: ignore[no-untyped-def]
    con = sqlite3.connect(cfg.db_path)
    con.row_factory = sqlite3.Row
    return con


async def test_one_task_mission_completes_and_logs_every_step(cfg) -> None:  # type: ignore[no-untyped-def]
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "hello.json", mission_json(shell_task(
            "Say hello", "echo hi > hello.txt",
            expectations=[{"type": "file_exists", "path": "hello.txt"}])))
        done = await w.wait_event("mission:completed")
    assert done.mission_id == "hello"
    assert done.data["outcome"] == "completed" and done.data["allPassed"] is True
    assert done.data["report"]["tasks"] == {"total": 1, "done": 1, "failed": 0}
    names = w.names("hello:1")
    for expected in ("task:created", "task:transition", "agent:spawned", "agent:finished",
                     "assessment:started", "assessment:check:complete", "assessment:complete"):
        assert expected in names
    transitions = [(e.data["from"], e.data["to"]) for e in w.of("task:transition")]
    assert transitions == [("pending", "assigned"), ("assigned", "in_progress"), ("in_progress", "review"),
                           ("review", "done")]
    # the log file has the same events, in seq order, one JSON object per line
    lines = [json.loads(x) for x in cfg.events_path.read_text().splitlines()]
    assert [x["seq"] for x in lines] == sorted(x["seq"] for x in lines)
    assert {"seq", "ts", "event", "data"} <= set(lines[-1])
    assert lines[-1]["event"] == "orchestrator:shutdown"
    # and the store has the attempt and its check
    con = _db(cfg)
    a = con.execute("SELECT * FROM attempts WHERE task_id = 'hello:1'").fetchone()
    assert a["exit_code"] == 0 and a["status"] == "finished" and json.loads(a["files"])["created"] == ["hello.txt"]
    c = con.execute("SELECT * FROM checks WHERE task_id = 'hello:1'").fetchone()
    assert c["passed"] == 1 and c["type"] == "file_exists"
    ev_rows = con.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    assert ev_rows == len(lines)


async def test_forward_dependencies_run_in_dependency_order(cfg) -> None:  # type: ignore[no-untyped-def]
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "fwd.json", mission_json(
            shell_task("last", "cat b.txt > c.txt", dependsOn=["middle"]),
            shell_task("middle", "cat a.txt > b.txt", dependsOn=["first"]),
            shell_task("first", "echo x > a.txt"),
        ))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    starts = [e.task_id for e in w.of("agent:spawned")]
    assert starts == ["fwd:3", "fwd:2", "fwd:1"]


async def test_failing_test_check_fixes_then_retries_then_fails(cfg) -> None:  # type: ignore[no-untyped-def]
    # config: max_retries 1, max_fix_attempts 1 -> (1+1)*(1+1) = 4 runs, then failed
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "bad.json", mission_json(shell_task(
            "never passes", "echo $POLPO_ATTEMPT_KIND >> kinds.txt",
            expectations=[{"type": "test", "command": "exit 3"}])))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "failed"
    assert [e.data["kind"] for e in w.of("agent:spawned")] == ["initial", "fix", "retry", "fix"]
    assert len(w.of("task:fix")) == 2 and len(w.of("task:retry")) == 1 and len(w.of("task:maxRetries")) == 1
    checks = w.of("assessment:check:complete")
    assert all(not c.data["passed"] for c in checks) and "exit 3" in checks[0].data["message"]
    con = _db(cfg)
    t = con.execute("SELECT * FROM tasks WHERE id = 'bad:1'").fetchone()
    assert (t["status"], t["attempts"], t["retries"], t["total_fixes"]) == ("failed", 4, 1, 2)
    assert "retries exhausted" in t["reason"]
    # the fix attempts got the feedback in their prompt
    prompts = [r["prompt"] for r in con.execute("SELECT prompt FROM attempts WHERE task_id='bad:1' ORDER BY number")]
    assert prompts[1].startswith("TARGETED FIX") and "exit 3" in prompts[1]
    assert prompts[2].startswith("RETRY")


async def test_fix_attempt_receives_feedback_and_passes(cfg) -> None:  # type: ignore[no-untyped-def]
    script = ('if [ "$POLPO_ATTEMPT_KIND" = fix ]; then printf "%s" "$POLPO_FEEDBACK" > seen.txt; '
              'echo ok > out.txt; fi')
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "fix.json", mission_json(shell_task(
            "needs a fix", script, expectations=[{"type": "file_exists", "path": "out.txt"}])))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    assert len(w.of("task:fix")) == 1
    seen = (cfg.state_dir / "workspaces" / "fix" / "seen.txt").read_text()
    assert "Missing 1/1 file(s)" in seen and "out.txt" in seen


async def test_dependency_failure_fails_dependents_at_once(cfg) -> None:  # type: ignore[no-untyped-def]
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "dep.json", mission_json(
            shell_task("broken", "exit 1", maxRetries=0),
            shell_task("child", "true", dependsOn=["broken"]),
            shell_task("grandchild", "true", dependsOn=["child"]),
            shell_task("independent", "true"),
        ))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "failed"
    rep = done.data["report"]
    assert rep["tasks"] == {"total": 4, "done": 1, "failed": 3}
    reasons = {f["title"]: f["reason"] for f in rep["failedTasks"]}
    assert reasons["child"] == "dependency failed: broken"
    assert reasons["grandchild"] == "dependency failed: child"
    assert {e.task_id for e in w.of("agent:spawned")} == {"dep:1", "dep:4"}


async def test_priority_orders_ready_tasks(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, max_concurrency=1))
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "prio.json", mission_json(
            shell_task("low", "true", priority=0.5),
            shell_task("normal", "true"),
            shell_task("high", "true", priority=3),
        ))
        await w.wait_event("mission:completed")
    assert [e.task_id for e in w.of("agent:spawned")] == ["prio:3", "prio:2", "prio:1"]


async def test_per_agent_concurrency_limit(tmp_path: Path) -> None:
    agents = """
[agents.shell]
type = "command"
command = ["bash", "-c", "{description}"]
max_concurrency = 1
"""
    cfg = load_config(write_config(tmp_path, agents=agents, max_concurrency=4))
    # each task records how many siblings run at the same time, through a lock-free counter file per pid
    script = ("echo start >> $POLPO_WORKSPACE/log; n=$(grep -c start $POLPO_WORKSPACE/log); "
              "m=$(grep -c end $POLPO_WORKSPACE/log); echo $((n-m)) >> $POLPO_WORKSPACE/overlap; "
              "sleep 0.2; echo end >> $POLPO_WORKSPACE/log")
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "lim.json", mission_json(*[shell_task(f"t{i}", script) for i in range(3)]))
        await w.wait_event("mission:completed")
    overlap = (cfg.state_dir / "workspaces" / "lim" / "overlap").read_text().split()
    assert overlap == ["1", "1", "1"]


async def test_agent_timeout_kills_and_retries(cfg) -> None:  # type: ignore[no-untyped-def]
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "slow.json", mission_json(shell_task(
            "too slow", "sleep 30 & sleep 30", maxDuration=0.5, maxRetries=0)))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "failed"
    fin = w.of("agent:finished")[0]
    assert fin.data["timedOut"] is True
    assert w.of("task:timeout")


async def test_cancel_mission_kills_running_agent(cfg) -> None:  # type: ignore[no-untyped-def]
    async with running_daemon(cfg) as (d, w):
        submit(cfg, "long.json", mission_json(
            shell_task("sleeper", "echo $$ > pid.tmp && mv pid.tmp pid; sleep 60"),
            shell_task("after", "true", dependsOn=["sleeper"])))
        await w.wait_event("agent:spawned")
        pid_file = cfg.state_dir / "workspaces" / "long" / "pid"
        with anyio.fail_after(10):
            while not pid_file.exists():  # the agent has written its pid: it is surely running
                await anyio.sleep(0.01)
        assert d.engine is not None
        d.engine.commands.cancel_mission("long")
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "cancelled"
    assert w.of("mission:cancelled")
    con = _db(cfg)
    states = [r[0] for r in con.execute("SELECT status FROM tasks WHERE mission_id='long' ORDER BY idx")]
    assert states == ["failed", "failed"]
    pid = int(pid_file.read_text())

    assert await dies(pid)


class _Broken:
    """An agent adapter with a bug: every run raises."""

    name = "broken"

    async def run(self, request: object, *, on_start: object) -> object:
        raise KeyError("a bug in an adapter")


async def test_a_task_whose_runner_raises_fails_and_the_daemon_finishes_the_others(cfg) -> None:  # type: ignore[no-untyped-def]
    from polpo.agents.registry import AgentFactory
    from polpo.clock import SystemClock

    clock = SystemClock()
    agents = AgentFactory(cfg, clock, extra={"broken": _Broken()})  # type: ignore[dict-item]
    async with running_daemon(cfg, clock=clock, agents=agents) as (_, w):
        submit(cfg, "bad.json", mission_json({"title": "t", "description": "x", "assignTo": "broken"}))
        submit(cfg, "good.json", mission_json(shell_task("a", "echo a > a.txt"),
                                              shell_task("b", "test -f a.txt", dependsOn=["a"])))
        bad = await w.wait_event("mission:completed", mission_id="bad")
        good = await w.wait_event("mission:completed", mission_id="good")
        submit(cfg, "later.json", mission_json(shell_task("c", "true")))  # the daemon still takes new work
        later = await w.wait_event("mission:completed", mission_id="later")
    assert bad.data["outcome"] == "failed"
    assert (good.data["outcome"], later.data["outcome"]) == ("completed", "completed")
    error = w.of("task:error")[0]
    assert error.task_id == "bad:1" and "KeyError" in error.data["error"]
    with _db(cfg) as con:
        row = con.execute("SELECT status, reason FROM tasks WHERE id = 'bad:1'").fetchone()
    assert row["status"] == "failed" and row["reason"].startswith("internal error in polpo")
