"""The LLM agent inside a real daemon: a task done through tool calls, a refused read outside the workspace,
the stored transcript, escalation from a failing command agent, and no API key anywhere in the state folder."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from polpo.config import Config, load_config
from tests.support.daemon import mission_json, run_cli, running_daemon, submit, write_config
from tests.support.fake_llm import FakeLLM, text, tool_call

pytestmark = pytest.mark.anyio

KEY = "sk-agent-secret-0a1b2c3d4e5f"
SECRET = "TOP-SECRET-OUTSIDE-THE-WORKSPACE"


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv("POLPO_AGENT_TEST_KEY", KEY)
    with FakeLLM() as server:
        yield server


def config(tmp_path: Path, srv: FakeLLM) -> Config:
    return load_config(write_config(tmp_path, agents=f"""
[agents.coder]
type = "llm"
model = "openai/fake-model"
api_base = "{srv.base_url}"
api_key_env = "POLPO_AGENT_TEST_KEY"
max_turns = 10

[agents.junior]
type = "command"
command = ["bash", "-c", "echo junior >> runs.log; exit 1"]

[llm]
max_retries = 0
"""))


async def test_an_llm_agent_writes_the_file_through_tools_and_passes_its_checks(tmp_path: Path,
                                                                              srv: FakeLLM) -> None:
    cfg = config(tmp_path, srv)
    ws = cfg.state_dir / "workspaces" / "calc"
    ws.parent.mkdir(parents=True)
    (ws.parent / "secret.txt").write_text(SECRET)
    srv.script(
        tool_call("read_file", {"path": "../secret.txt"}),
        tool_call("write_file", {"path": "calc.py", "content": "def add(a, b):\n    return a + b\n"}),
        tool_call("run_command", {"command": "python3 -c 'import calc; print(calc.add(2, 3))'"}),
        tool_call("register_outcome", {"type": "file", "label": "module", "path": "calc.py"}),
        text("calc.py has add()."),
    )
    task = {"title": "Write calc", "description": "Create calc.py with add(a, b).", "assignTo": "coder",
            "expectations": [{"type": "file_exists", "path": "calc.py"},
                             {"type": "test", "command": "python3 -c 'import calc; assert calc.add(2, 3) == 5'"}]}
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "calc.json", mission_json(task, description="A tiny calculator"))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    assert (ws / "calc.py").read_text().startswith("def add")
    first = srv.requests[0]
    prompt = json.dumps(first["messages"])
    assert "Create calc.py with add(a, b)." in prompt and "A tiny calculator" in prompt
    # the refused read went back to the model as an error, and the secret never left the disk
    second = json.dumps(srv.requests[1]["messages"])
    assert "Error:" in second
    assert all(SECRET not in json.dumps(r["messages"]) for r in srv.requests)
    con = sqlite3.connect(cfg.db_path)
    model, outcomes, tokens = con.execute("SELECT model, outcomes, tokens FROM attempts").fetchone()
    assert model == "openai/fake-model" and tokens > 0
    assert json.loads(outcomes)[0]["label"] == "module"
    transcript = json.loads(con.execute("SELECT data FROM transcripts").fetchone()[0])
    tools = [t for t in transcript if t.get("type") == "tool"]
    assert tools[0]["ok"] is False and tools[1]["ok"] is True
    shown = await anyio.to_thread.run_sync(lambda: run_cli("show", "calc:1", "--json", "--config", str(cfg.source)))
    assert json.loads(shown.stdout)["attempts"][0]["transcript"]
    summary = await anyio.to_thread.run_sync(lambda: run_cli("show", "calc:1", "--config", str(cfg.source)))
    assert "what the agent did:" in summary.stdout and "write_file" in summary.stdout
    for path in cfg.state_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert KEY.encode() not in data, path
    assert first.headers["authorization"] == f"Bearer {KEY}"


async def test_a_failing_command_agent_escalates_to_the_llm_agent(tmp_path: Path, srv: FakeLLM) -> None:
    cfg = config(tmp_path, srv)
    srv.script(tool_call("write_file", {"path": "out.txt", "content": "done\n"}), text("wrote out.txt"))
    task = {"title": "build", "description": "Create out.txt.", "assignTo": "junior", "maxRetries": 1,
            "maxFixAttempts": 0, "retryPolicy": {"fallbackAgent": "coder"},
            "expectations": [{"type": "file_exists", "path": "out.txt"}]}
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "esc.json", mission_json(task))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    esc = w.of("escalation:triggered")
    assert [(e.data["handler"], e.data["target"]) for e in esc] == [("agent", "coder")]
    con = sqlite3.connect(cfg.db_path)
    rows = con.execute("SELECT agent, model FROM attempts ORDER BY number").fetchall()
    assert rows == [("junior", None), ("junior", None), ("coder", "openai/fake-model")]
