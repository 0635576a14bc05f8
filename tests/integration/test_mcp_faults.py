"""MCP servers that fail — killed mid-call, never answering, writing garbage on stdout, crashing, unable to start —
met by the LLM agent (its model played by FakeLLM): each becomes a reason the model or the attempt gets, the next
call starts the server again, and nothing is left running (checked in the process table)."""

from __future__ import annotations

import os
import signal
from datetime import timedelta
from pathlib import Path

import anyio
import pytest

from polpo.agents.base import AgentResult
from polpo.config_tools import McpServerSettings
from polpo.tools.marks import ATTEMPT_MARK
from polpo.tools.proctable import find_processes_with_env
from tests.integration.test_mcp_agent import agent, request, run
from tests.support.fake_llm import FakeLLM, text, tool_call
from tests.support.mcp_servers import faulty_command
from tests.support.procs import dies, pid_in

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("fake_llm_key")]


def faulty(tmp_path: Path, mode: str, **settings: object) -> dict[str, McpServerSettings]:
    """The faulty server in ``mode``, told (through the environment its config gives it: it gets nothing else)
    where to write its pid and to mark a call's arrival."""
    command, args = faulty_command(mode)
    env = {"FAULTY_PID_FILE": str(tmp_path / "server.pid"), "FAULTY_CALLED_FILE": str(tmp_path / "called")}
    return {"bad": McpServerSettings(command=command, args=args, env=env, **settings)}  # type: ignore[arg-type]


def results(r: AgentResult) -> list[dict[str, object]]:
    return [e for e in r.transcript or [] if e["type"] == "tool"]


def nothing_left(marker: str) -> bool:
    return find_processes_with_env(ATTEMPT_MARK, marker) == []


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


async def test_a_server_killed_mid_call_is_the_models_error_and_the_next_call_starts_it_again(
        ws: Path, tmp_path: Path) -> None:
    called = tmp_path / "called"
    pids: list[int] = []
    with FakeLLM() as srv:
        srv.script(tool_call("bad__work", {"x": "one"}), tool_call("bad__work", {"x": "two"}), text("done"))
        req = request(ws)
        a = agent(srv, tmp_path, faulty(tmp_path, "slow"))

        async def kill_when_called() -> None:
            for _ in range(2):  # each call: a new server process, killed while the call is in flight
                with anyio.fail_after(30):
                    while not called.exists():
                        await anyio.sleep(0.02)
                pid = pid_in(tmp_path / "server.pid")
                assert pid is not None
                called.unlink()
                pids.append(pid)
                os.kill(pid, signal.SIGKILL)

        async with anyio.create_task_group() as tg:
            tg.start_soon(kill_when_called)
            result = await run(a, req)
    assert result.ok
    first, second = results(result)
    assert first["ok"] is False and first["error"] == "mcp"
    assert "was killed by signal 9 (SIGKILL) during the call" in str(first["result"])
    assert "the next call starts it again" in str(first["result"])
    assert second["ok"] is False and "was killed by signal 9" in str(second["result"])
    assert len(set(pids)) == 2  # the second call started the server again: a new process
    assert nothing_left(req.env_marker[1])


async def test_a_server_that_never_answers_times_out_is_stopped_and_the_daemon_goes_on(ws: Path,
                                                                                     tmp_path: Path) -> None:
    with FakeLLM() as srv:
        srv.script(tool_call("bad__work", {"x": "one"}), text("gave up on it"))
        req = request(ws)
        result = await run(agent(srv, tmp_path, faulty(tmp_path, "hang", timeout=timedelta(seconds=1))), req)
    assert result.ok
    [call] = results(result)
    assert call["ok"] is False
    assert "did not answer within 1 s; polpo stopped it (the next call starts it again)" in str(call["result"])
    pid = pid_in(tmp_path / "server.pid")
    assert pid is not None and await dies(pid)
    assert nothing_left(req.env_marker[1])


async def test_garbage_on_stdout_ends_the_call_at_once_with_the_line_as_its_reason(ws: Path, tmp_path: Path) -> None:
    with FakeLLM() as srv:
        srv.script(tool_call("bad__work", {"x": "one"}), text("ok"))
        req = request(ws)
        result = await run(agent(srv, tmp_path, faulty(tmp_path, "garbage", timeout=timedelta(seconds=60))), req)
    [call] = results(result)
    assert call["ok"] is False
    assert "it wrote something that is not an MCP message on its stdout ('Traceback (most recent call last): " \
           "not a message')" in str(call["result"])
    assert "did not answer" not in str(call["result"])  # not its timeout: the line itself ended the call
    assert nothing_left(req.env_marker[1])


async def test_a_server_that_crashes_during_a_call_says_why_and_a_tool_error_is_not_a_crash(
        ws: Path, tmp_path: Path) -> None:
    with FakeLLM() as srv:
        srv.script(tool_call("bad__work", {"x": 1}), tool_call("bad__work", {"x": "one"}), text("ok"))
        req = request(ws)
        result = await run(agent(srv, tmp_path, faulty(tmp_path, "crash")), req)
    invalid, crashed = results(result)
    assert invalid["error"] == "invalid_arguments"  # checked against its schema: the server never saw it
    assert crashed["ok"] is False
    assert "it exited with code 3 during the call; its stderr: boom: the disk is on fire" in str(crashed["result"])
    assert nothing_left(req.env_marker[1])


@pytest.mark.parametrize(("command", "args", "reason"), [
    ("no-such-mcp-server", [], "MCP server 'bad' could not start: command not found: no-such-mcp-server"),
    (*faulty_command("nostart"),
     "MCP server 'bad' could not start: it exited with code 2 before its handshake; its stderr: cannot open the "
     "database"),
])
async def test_a_server_that_cannot_start_fails_the_attempt_with_the_reason(
        ws: Path, tmp_path: Path, command: str, args: list[str], reason: str) -> None:
    with FakeLLM() as srv:
        req = request(ws)
        result = await run(agent(srv, tmp_path, {"bad": McpServerSettings(command=command, args=args)}), req)
        assert srv.requests == []  # the model was never called: its tools could not be known
    assert not result.ok and result.exit_code is None and result.provider_error is None  # not an outage
    assert result.error == reason
    assert nothing_left(req.env_marker[1])


async def test_an_attempt_that_times_out_during_a_call_leaves_nothing_running(ws: Path, tmp_path: Path) -> None:
    with FakeLLM() as srv:
        srv.script(tool_call("bad__work", {"x": "one"}))
        req = request(ws, timeout=3.0)
        result = await run(agent(srv, tmp_path, faulty(tmp_path, "slow")), req)
    assert result.timed_out
    pid = pid_in(tmp_path / "server.pid")
    assert pid is not None and await dies(pid)
    assert nothing_left(req.env_marker[1])


async def test_shared_servers_a_previous_life_left_running_are_ended_at_start(tmp_path: Path) -> None:
    from polpo.mcp.pool import McpPool
    from polpo.tools.marks import attempt_mark

    state = tmp_path / "state"
    mark = attempt_mark(state, "mcp/coder/time")
    orphan = await anyio.open_process(["sleep", "60"], env={**os.environ, ATTEMPT_MARK: mark},
                                      start_new_session=True)
    async with orphan:
        # the kernel fills a process's /proc environ late in its exec, after the parent already saw it start
        with anyio.fail_after(10):
            while orphan.pid not in find_processes_with_env(ATTEMPT_MARK, mark):
                await anyio.sleep(0.01)
        pool = McpPool({"time": McpServerSettings(command="mcp-server-time", shared=True)}, state)
        assert await pool.end_previous() == 1
        assert await orphan.wait() == -signal.SIGTERM


class Guard:
    """Stands in for a cluster node's guard (polpo.tools.guard_link): told of every process group started."""

    def __init__(self, allow: bool = True) -> None:
        self.allow = allow
        self.groups: list[int] = []
        self.gone: list[int] = []

    def started(self, pgid: int) -> bool:
        self.groups.append(pgid)
        return self.allow

    def ended(self, pgid: int) -> None:
        self.gone.append(pgid)


@pytest.mark.parametrize("allow", [True, False])
async def test_the_guard_holds_a_servers_process_group_and_may_refuse_it(ws: Path, tmp_path: Path,
                                                                        allow: bool) -> None:
    from polpo.tools import procs

    guard = Guard(allow)
    procs.WATCH.append(guard)
    try:
        with FakeLLM() as srv:
            srv.script(tool_call("bad__work", {"x": "one"}), text("ok"))
            req = request(ws)
            result = await run(agent(srv, tmp_path, faulty(tmp_path, "ok")), req)
    finally:
        procs.WATCH.remove(guard)
    pid = pid_in(tmp_path / "server.pid")
    if allow:
        assert result.ok and results(result)[0]["result"] == "done: one"
        assert pid is not None and guard.groups == [pid] and guard.gone == [pid]  # its own group, held, let go
    else:  # a node that may no longer act on its lease starts nothing
        assert result.error == ("MCP server 'bad' could not start: this node may not start programs now: its "
                                "lease is ending")
        assert len(guard.groups) == 1 and guard.gone == guard.groups
        assert pid is None or await dies(pid)
    assert nothing_left(req.env_marker[1])
