"""MCP servers across a kill -9 of the daemon process: the server of a call in flight (busy, it does not notice its
stdin closing) is ended by the daemon's guard, which holds it like an agent's processes (a SQLite daemon has a guard
since issue 28; before, the restarted daemon's sweep ended it, by the attempt's marker); the task runs again;
nothing is left running (checked in the process table)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from polpo.tools.marks import ATTEMPT_MARK, attempt_mark
from polpo.tools.proctable import find_processes_with_env
from tests.support.daemon import daemon_process, llm_agent, mission_json, wait_events, write_config
from tests.support.fake_llm import FakeLLM, text, tool_call
from tests.support.mcp_servers import FAULTY, mcp_path
from tests.support.procs import pid_in, wait_dead

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)  # two daemon starts, each importing litellm: minutes on a loaded machine
def test_a_server_in_a_call_when_its_daemon_is_killed_dies_with_it_and_the_task_runs_again(tmp_path: Path) -> None:
    called = tmp_path / "called"
    env = {"FAULTY_PID_FILE": str(tmp_path / "slow.pid"), "FAULTY_CALLED_FILE": str(called)}
    with FakeLLM() as srv:
        cfg = write_config(tmp_path, agents=llm_agent(srv.base_url, 'mcp = ["slow"]') + f"""
[mcp.servers.slow]
command = "{sys.executable}"
args = ["{FAULTY}", "slow"]
env = {{ FAULTY_PID_FILE = "{env['FAULTY_PID_FILE']}", FAULTY_CALLED_FILE = "{called}" }}
""")
        state = tmp_path / "state"
        srv.script(tool_call("slow__work", {"x": "a"}), text("done after the restart"))
        (tmp_path / "missions" / "slow.json").write_text(mission_json(
            {"title": "Slow", "description": "Work slowly.", "assignTo": "coder"}))
        daemon_env = {"POLPO_TEST_FAKE_LLM_KEY": "sk-test-mcp-crash-01234", "PATH": mcp_path()}
        with daemon_process(cfg, env=daemon_env) as proc:
            wait_events(state, lambda evs: called.exists(), 90)  # the slow call is in flight
            slow = pid_in(tmp_path / "slow.pid")
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        assert slow is not None and wait_dead(slow)  # the guard ended it with its daemon
        with daemon_process(cfg, env=daemon_env):
            evs = wait_events(state, lambda evs: any(e["event"] == "mission:completed" for e in evs), 90)
            assert wait_dead(slow)
    done = next(e for e in evs if e["event"] == "mission:completed")
    assert done["data"]["outcome"] == "completed"
    assert any(e["event"] == "task:recovered" for e in evs)  # the interrupted attempt ran again
    assert find_processes_with_env(ATTEMPT_MARK, attempt_mark(state, ""), prefix=True) == []
