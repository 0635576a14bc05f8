"""MCP servers inside a real daemon: an LLM agent (FakeLLM) inspects a repository through mcp-server-git, writes
through the filesystem server and passes its checks; a server that cannot start fails the attempt, not the daemon;
a shared server serves an agent's tasks from one process; nothing any of them started is left running."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from polpo.config import Config, load_config
from polpo.tools.marks import ATTEMPT_MARK, attempt_mark
from polpo.tools.proctable import find_processes_with_env
from tests.integration.test_mcp_agent import git
from tests.support.daemon import (
    DEFAULT_AGENTS,
    llm_agent,
    mission_json,
    run_cli,
    running_daemon,
    shell_task,
    submit,
    write_config,
)
from tests.support.fake_llm import FakeLLM, text, tool_call
from tests.support.mcp_servers import faulty_command, mcp_path, need_npm_servers
from tests.support.procs import dies, pid_in

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("fake_llm_key")]


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv("PATH", mcp_path())
    with FakeLLM() as server:
        yield server


def config(tmp_path: Path, srv: FakeLLM, servers: str, mcp: str, extra: str = "") -> Config:
    return load_config(write_config(tmp_path, agents=DEFAULT_AGENTS + llm_agent(srv.base_url, f"mcp = {mcp}")
                                    + servers, extra=extra))


def left_running(cfg: Config) -> list[int]:
    """Every process an attempt (or a shared server) of this state folder started that is still alive."""
    return find_processes_with_env(ATTEMPT_MARK, attempt_mark(cfg.state_dir, ""), prefix=True)


async def test_an_agent_works_through_git_and_filesystem_servers_and_its_checks_pass(tmp_path: Path,
                                                                                    srv: FakeLLM) -> None:
    need_npm_servers()
    cfg = config(tmp_path, srv, """
[mcp.servers.git]
command = "mcp-server-git"
args = ["--repository", "."]

[mcp.servers.fs]
command = "mcp-server-filesystem"
args = ["."]
""", '["git", "fs"]')
    ws = cfg.state_dir / "workspaces" / "calc"
    ws.mkdir(parents=True)
    git(ws, "init", "-q", "-b", "main")
    (ws / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    git(ws, "add", "calc.py")
    git(ws, "commit", "-q", "-m", "add the calculator")
    srv.script(tool_call("git__git_log", {"repo_path": str(ws), "max_count": 5}),
               tool_call("fs__write_file", {"path": "CHANGES.md", "content": "- add the calculator\n"}),
               text("CHANGES.md lists the history."))
    task = {"title": "Write the changelog", "description": "Write CHANGES.md from the git history.",
            "assignTo": "coder", "expectations": [
                {"type": "file_exists", "path": "CHANGES.md"},
                {"type": "test", "command": "grep -q 'add the calculator' CHANGES.md"}]}
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "calc.json", mission_json(task))
        done = await w.wait_event("mission:completed", timeout=90)
        finished = w.of("agent:finished")[0]
        shown = await anyio.to_thread.run_sync(lambda: run_cli("show", "calc:1", "--config", str(cfg.source)))
    assert done.data["outcome"] == "completed"
    timeline = [line.strip() for line in shown.stdout.splitlines() if "·" in line]  # polpo show's, by tool name
    assert any(line.startswith("turn 1 · ✓ git.git_log(repo_path=") and "max_count=5) → " in line
               and "add the calculator" in line for line in timeline), shown.stdout
    assert 'turn 2 · ✓ fs.write_file(path="CHANGES.md", content="- add the calculator\\n") → Successfully wrote ' \
           "to CHANGES.md" in timeline, shown.stdout
    assert finished.data["mcp"]["git"]["calls"] == 1 and finished.data["mcp"]["fs"]["calls"] == 1
    assert finished.data["mcp"]["git"]["errors"] == 0
    assert left_running(cfg) == []


async def test_a_server_that_cannot_start_fails_its_attempt_and_the_daemon_goes_on(tmp_path: Path,
                                                                                  srv: FakeLLM) -> None:
    command, args = faulty_command("nostart")
    cfg = config(tmp_path, srv, f"""
[mcp.servers.db]
command = "{command}"
args = {args!r}
""".replace("'", '"'), '["db"]')
    tasks = [{"title": "Query", "description": "Ask the database.", "assignTo": "coder", "maxRetries": 0},
             shell_task("Other work", "echo fine > fine.txt",
                        expectations=[{"type": "file_exists", "path": "fine.txt"}])]
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "db.json", mission_json(*tasks))
        done = await w.wait_event("mission:completed", timeout=90)
        failed = w.of("agent:finished", task_id="db:1")
        submit(cfg, "after.json", mission_json(shell_task("Later", "true")))
        later = await w.wait_event("mission:completed", mission_id="after", timeout=90)
    assert done.data["outcome"] == "failed" and later.data["outcome"] == "completed"
    assert failed[0].data["error"] == ("MCP server 'db' could not start: it exited with code 2 before its handshake; "
                                       "its stderr: cannot open the database")
    assert not w.of("agent:interrupted")  # not an outage: nothing waits for the server to come back
    assert [e.data["to"] for e in w.of("task:transition", task_id="db:2")][-1] == "done"
    assert srv.requests == []
    assert left_running(cfg) == []


async def test_a_shared_server_serves_an_agents_tasks_from_one_process(tmp_path: Path, srv: FakeLLM) -> None:
    cfg = config(tmp_path, srv, """
[mcp.servers.time]
command = "mcp-server-time"
args = ["--local-timezone", "UTC"]
shared = true
""", '["time"]')
    srv.script(tool_call("time__get_current_time", {"timezone": "UTC"}), text("noted"),
               tool_call("time__get_current_time", {"timezone": "Asia/Tokyo"}), text("noted again"))
    first = {"title": "One", "description": "Tell the time.", "assignTo": "coder"}
    second = {"title": "Two", "description": "Tell the time in Tokyo.", "assignTo": "coder", "dependsOn": ["One"]}
    shared_mark = attempt_mark(cfg.state_dir, "mcp/coder/time")
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "t.json", mission_json(first, second))
        done = await w.wait_event("mission:completed", timeout=90)
        running = find_processes_with_env(ATTEMPT_MARK, shared_mark)
    assert done.data["outcome"] == "completed"
    assert len(running) == 1  # one process for both tasks, still up between them
    assert "Asia/Tokyo" in [m for m in srv.requests[-1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert (cfg.state_dir / "mcp" / "coder" / "time").is_dir()  # its own folder, not a task's workspace
    assert left_running(cfg) == []  # the daemon's stop ended it


async def test_cancelling_a_mission_kills_the_server_of_a_call_in_flight(tmp_path: Path, srv: FakeLLM) -> None:
    command, args = faulty_command("slow")
    called, pid_file = tmp_path / "called", tmp_path / "slow.pid"
    cfg = config(tmp_path, srv, f"""
[mcp.servers.slow]
command = "{command}"
args = {json.dumps(args)}
env = {{ FAULTY_PID_FILE = "{pid_file}", FAULTY_CALLED_FILE = "{called}" }}
""", '["slow"]')
    srv.script(tool_call("slow__work", {"x": "a"}))
    async with running_daemon(cfg) as (daemon, w):
        submit(cfg, "slow.json", mission_json({"title": "Slow", "description": "Work.", "assignTo": "coder"}))
        with anyio.fail_after(60):
            while not called.exists():
                await anyio.sleep(0.02)
        assert daemon.engine is not None
        await daemon.engine.commands.cancel("slow", by="test")
        done = await w.wait_event("mission:completed", timeout=90)
    pid = pid_in(pid_file)
    assert done.data["outcome"] == "cancelled"
    assert pid is not None and await dies(pid)
    assert left_running(cfg) == []
