"""Questions and tool approvals across a kill -9 of the daemon process (an LLM agent's question, a command agent's,
an approved call): the question stays asked, the answer given while no daemon runs waits in the store, and after
the restart the agent receives it once — a command agent runs again once, an approved call runs once — and the
mission completes."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.support.daemon import (
    daemon_process,
    llm_agent,
    mission_json,
    read_events,
    run_cli,
    wait_events,
    write_config,
)
from tests.support.fake_llm import FakeLLM, text, tool_call

pytestmark = pytest.mark.slow

KEY = {"POLPO_TEST_FAKE_LLM_KEY": "sk-test-crash-0123456789"}


def setup(tmp_path: Path, srv: FakeLLM, coder: str) -> tuple[Path, Path]:
    cfg = write_config(tmp_path, agents=llm_agent(srv.base_url, coder))
    return cfg, tmp_path / "state"


def kill_9(proc: object) -> None:
    os.kill(proc.pid, signal.SIGKILL)  # type: ignore[attr-defined]
    proc.wait()  # type: ignore[attr-defined]


def drop(tmp_path: Path, name: str, task: dict[str, object]) -> None:
    (tmp_path / "missions" / name).write_text(mission_json(task))


def has(name: str, count: int = 1) -> object:
    return lambda evs: sum(e["event"] == name for e in evs) >= count


def tool_texts(req: dict[str, object]) -> list[str]:
    return [str(m["content"]) for m in req["messages"] if m["role"] == "tool"]  # type: ignore[attr-defined,index]


@pytest.mark.timeout(300)  # two daemon starts, each importing litellm: minutes on a loaded machine
def test_a_question_outlives_a_kill_9_and_its_answer_is_received_once(tmp_path: Path) -> None:
    with FakeLLM() as srv:
        cfg, state = setup(tmp_path, srv, "ask_human = true")
        srv.script(tool_call("ask_human", {"question": "Which port?"}),
                   tool_call("write_file", {"path": "port.txt", "content": "8080\n"}), text("done"))
        drop(tmp_path, "web.json", {"title": "Serve", "description": "Write port.txt.", "assignTo": "coder",
                                    "expectations": [{"type": "file_exists", "path": "port.txt"}]})
        with daemon_process(cfg, env=KEY) as proc:
            wait_events(state, has("question:asked"), 120)
            kill_9(proc)
        queued = run_cli("answer", "web:1", "8080", "--by", "fay", "--config", str(cfg))
        assert queued.returncode == 0, queued.stderr
        assert "queued answer web:1: no daemon is running" in queued.stdout
        with daemon_process(cfg, env=KEY):
            evs = wait_events(state, has("mission:completed"), 120)
        requests = list(srv.requests)
    done = next(e for e in evs if e["event"] == "mission:completed")
    assert done["data"]["outcome"] == "completed"
    assert (state / "workspaces" / "web" / "port.txt").read_text() == "8080\n"
    roles = [[m["role"] for m in r["messages"]] for r in requests]  # type: ignore[index]
    assert len(requests) == 3, roles  # asked; then, after the restart, the conversation went on once
    assert tool_texts(requests[1]) == ["fay answered: 8080"], (roles, [e["event"] for e in evs])
    assert [t for r in requests for t in tool_texts(r)].count("fay answered: 8080") == 2  # sent, then resent as
    # part of the history in the last request: one delivery, one conversation
    assert [e["event"] for e in evs].count("question:answered") == 1
    shown = json.loads(run_cli("show", "web:1", "--json", "--config", str(cfg)).stdout)
    [q] = shown["questions"]
    assert q["status"] == "delivered" and q["delivered_in"] == "web:1/2"


@pytest.mark.timeout(300)  # two daemon starts, each importing litellm: minutes on a loaded machine
def test_an_approved_call_waits_across_a_kill_9_and_runs_once(tmp_path: Path) -> None:
    with FakeLLM() as srv:
        cfg, state = setup(tmp_path, srv, 'approve_tools = ["run_command"]')
        srv.script(tool_call("run_command", {"command": "echo shipped >> ship.log"}), text("shipped"))
        drop(tmp_path, "ship.json", {"title": "Ship", "description": "Ship it.", "assignTo": "coder",
                                     "expectations": [{"type": "file_exists", "path": "ship.log"}]})
        with daemon_process(cfg, env=KEY) as proc:
            evs = wait_events(state, has("approval:requested"), 120)
            kill_9(proc)
        requested = next(e for e in evs if e["event"] == "approval:requested")
        assert requested["data"]["tool"] == "run_command"
        assert requested["data"]["arguments"] == {"command": "echo shipped >> ship.log"}
        assert not (state / "workspaces" / "ship" / "ship.log").exists()
        with daemon_process(cfg, env=KEY):
            wait_events(state, has("orchestrator:started", 2), 120)  # the second daemon's, not the first's
            approved = run_cli("approve", "ship:1", "--by", "gus", "--config", str(cfg))
            assert approved.returncode == 0, approved.stderr
            evs = wait_events(state, has("mission:completed"), 120)
    assert next(e for e in evs if e["event"] == "mission:completed")["data"]["outcome"] == "completed"
    assert (state / "workspaces" / "ship" / "ship.log").read_text() == "shipped\n"  # once
    resolved = [e["data"] for e in read_events(state) if e["event"] == "approval:resolved"]
    assert resolved == [{"status": "approved", "by": "gus", "tool": "run_command"}]


ASKER = """
[agents.asker]
type = "command"
command = ["bash", "-c", 'echo "run ${POLPO_ANSWER:-asks}" >> RUNS; if [ -z "$POLPO_ANSWER" ]; then echo "Which database should I use?"; else printf "%s\\\\n" "$POLPO_ANSWER" > db.txt; fi']
ask_human = true
timeout = 30

[questions]
classify = false
"""


def test_a_command_agents_question_outlives_a_kill_9_and_it_runs_again_once(tmp_path: Path) -> None:
    runs = tmp_path / "runs.log"  # outside the workspace: a run that changed files did not ask (Polpo's heuristic)
    cfg, state = write_config(tmp_path, agents=ASKER.replace("RUNS", str(runs))), tmp_path / "state"
    drop(tmp_path, "db.json", {"title": "Pick a database", "description": "Choose one.", "assignTo": "asker",
                               "expectations": [{"type": "file_exists", "path": "db.txt"}]})
    with daemon_process(cfg) as proc:
        wait_events(state, has("question:asked"), 120)
        kill_9(proc)
    queued = run_cli("answer", "db:1", "PostgreSQL", "--by", "dana", "--config", str(cfg))
    assert queued.returncode == 0, queued.stderr
    with daemon_process(cfg):
        evs = wait_events(state, has("mission:completed"), 120)
    assert next(e for e in evs if e["event"] == "mission:completed")["data"]["outcome"] == "completed"
    ws = state / "workspaces" / "db"
    assert runs.read_text() == "run asks\nrun PostgreSQL\n"  # asked once, ran again once
    assert (ws / "db.txt").read_text() == "PostgreSQL\n"
    assert [e["event"] for e in evs].count("question:answered") == 1
    [q] = json.loads(run_cli("show", "db:1", "--json", "--config", str(cfg)).stdout)["questions"]
    assert q["status"] == "delivered" and q["delivered_in"] == "db:1/2"
