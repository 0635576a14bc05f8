"""Questions inside a real daemon: an LLM agent's ask_human answered through the CLI, a command agent's question
(Polpo's detection) answered through the HTTP API, a question nobody answers answered by the configured model, and
a filesystem server's write that waits for approval; what `polpo status`, `polpo show`, the API and /metrics say."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from polpo.clock import FakeClock
from polpo.config import Config, load_config
from tests.support.daemon import llm_agent, mission_json, run_cli, running_daemon, submit, write_config
from tests.support.fake_llm import FakeLLM, text, tool_call
from tests.support.mcp_servers import mcp_path, need_npm_servers

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("fake_llm_key")]

ASKING_SCRIPT = ('if [ -z "$POLPO_ANSWER" ]; then echo "Which database should I use?"; '
                 'else printf "%s\\n" "$POLPO_ANSWER" > db.txt; echo "$POLPO_PROMPT" > prompt.txt; fi')


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv("PATH", mcp_path())
    with FakeLLM() as server:
        yield server


def config(tmp_path: Path, srv: FakeLLM, coder: str = "", extra: str = "") -> Config:
    return load_config(write_config(tmp_path, agents=llm_agent(srv.base_url, "ask_human = true", coder) + f"""
[agents.asker]
type = "command"
command = ["bash", "-c", {json.dumps(ASKING_SCRIPT)}]
ask_human = true
""", extra=extra))


async def cli(cfg: Config, *args: str) -> str:
    done = await anyio.to_thread.run_sync(lambda: run_cli(*args, "--config", str(cfg.source)))
    assert done.returncode == 0, done.stderr
    return done.stdout


def tool_texts(req: dict[str, object]) -> list[str]:
    return [str(m["content"]) for m in req["messages"] if isinstance(m, dict) and m["role"] == "tool"]  # type: ignore[index]


async def test_an_llm_agents_question_is_shown_answered_through_the_cli_and_received_once(tmp_path: Path,
                                                                                       srv: FakeLLM) -> None:
    people = tmp_path / "people.jsonl"
    cfg = config(tmp_path, srv, extra=f"""
[channels.people]
type = "file"
path = "{people}"

[[notify.rules]]
events = ["question:*", "approval:*"]
channels = ["people"]
""")
    srv.script(tool_call("ask_human", {"question": "Which port should it serve on?"}),
               tool_call("write_file", {"path": "port.txt", "content": "8080\n"}), text("done: 8080"))
    task = {"title": "Serve", "description": "Write port.txt.", "assignTo": "coder",
            "expectations": [{"type": "file_exists", "path": "port.txt"}]}
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "web.json", mission_json(task))
        asked = await w.wait_event("question:asked", timeout=90)
        status = await cli(cfg, "status")
        said = await cli(cfg, "answer", "web:1", "8080, as everywhere", "--by", "alice")
        done = await w.wait_event("mission:completed", timeout=90)
        shown = await cli(cfg, "show", "web:1")
    assert asked.data["question"] == "Which port should it serve on?" and asked.data["source"] == "ask_human"
    assert "waiting for an answer" in status and "web:1 asks: Which port should it serve on?" in status
    assert 'polpo answer web:1 "…"' in status
    assert said.strip() == "answered web:1: its agent goes on with the answer"
    assert done.data["outcome"] == "completed"
    assert (cfg.state_dir / "workspaces" / "web" / "port.txt").read_text() == "8080\n"
    answers = [t for r in srv.requests for t in tool_texts(r) if "8080, as everywhere" in t]
    assert set(answers) == {"alice answered: 8080, as everywhere"}
    assert tool_texts(srv.requests[1]) == ["alice answered: 8080, as everywhere"]  # went on from its question
    assert "question (ask_human, attempt 1)" in shown and "answered by alice" in shown
    assert "asked a person: Which port should it serve on?" in shown  # the first attempt's timeline
    answered = w.of("question:answered")[0].data
    assert (answered["by"], answered["source"]) == ("alice", "person")
    await w.wait_for(lambda e: e.event == "notification:sent" and e.data["event"] == "question:answered", 90)
    sent = [json.loads(line) for line in people.read_text().splitlines()]
    assert [n["event"] for n in sent] == ["question:asked", "question:answered"]  # the channel heard both
    assert "Which port should it serve on?" in json.dumps(sent[0])


async def test_a_command_agents_question_is_answered_through_the_http_api_and_it_runs_again(
        tmp_path: Path, srv: FakeLLM) -> None:
    cfg = config(tmp_path, srv, extra='[http]\nlisten = "127.0.0.1:0"\n[questions]\nclassify = false\n')
    task = {"title": "Pick a database", "description": "Choose one.", "assignTo": "asker",
            "expectations": [{"type": "file_exists", "path": "db.txt"}]}
    async with running_daemon(cfg) as (daemon, w):
        submit(cfg, "db.json", mission_json(task))
        asked = await w.wait_event("question:asked", timeout=90)
        assert daemon.http is not None
        base = daemon.http.url
        async with httpx.AsyncClient(base_url=base) as client:
            seen = (await client.get("/api/tasks/db:1")).json()
            mission = (await client.get("/api/missions/db")).json()
            refused = await client.post("/api/tasks/db:1/answer", json={})
            answered = await client.post("/api/tasks/db:1/answer", json={"answer": "PostgreSQL", "by": "dana"})
        done = await w.wait_event("mission:completed", timeout=90)
    assert asked.data["source"] == "output" and asked.data["question"] == "Which database should I use?"
    assert seen["status"] == "awaiting_answer"
    assert [(q["kind"], q["text"], q["status"]) for q in seen["questions"]] == [
        ("question", "Which database should I use?", "asked")]
    assert [(q["taskId"], q["command"]) for q in mission["waiting"]] == [("db:1", 'polpo answer db:1 "…"')]
    assert refused.status_code == 409 and "the answer is empty" in refused.json()["detail"]
    assert answered.status_code == 200 and answered.json()["message"].startswith("answered db:1")
    assert done.data["outcome"] == "completed"
    ws = cfg.state_dir / "workspaces" / "db"
    assert (ws / "db.txt").read_text() == "PostgreSQL\n"  # $POLPO_ANSWER: the answer itself
    assert "[Polpo Clarification]\nQ: Which database should I use?\nA: dana answered: PostgreSQL" in (
        ws / "prompt.txt").read_text()


async def test_a_question_nobody_answers_is_answered_by_the_configured_model(tmp_path: Path, srv: FakeLLM) -> None:
    clock = FakeClock()
    cfg = config(tmp_path, srv, extra=f'[questions]\ntimeout = 600\nmodel = "openai/fake-model"\n'
                                      f'api_base = "{srv.base_url}"\napi_key_env = "POLPO_TEST_FAKE_LLM_KEY"\n')
    srv.script(tool_call("ask_human", {"question": "Which port?"}), text("Use 8443, with TLS."),
               text("I will use 8443"))
    task = {"title": "Serve", "description": "Pick the port.", "assignTo": "coder"}
    async with running_daemon(cfg, clock=clock) as (_, w):
        submit(cfg, "late.json", mission_json(task))
        await w.wait_event("question:asked", timeout=90)
        clock.advance(601)
        answered = await w.wait_event("question:answered", timeout=90)
        done = await w.wait_event("mission:completed", timeout=90)
    assert (answered.data["by"], answered.data["source"]) == ("model:openai/fake-model", "model")
    assert answered.data["answer"] == "Use 8443, with TLS."
    asking = srv.requests[1]["messages"]  # the answering model's request: the mission, the task, the question
    assert "did not answer in time" in asking[0]["content"] and "Which port?" in asking[1]["content"]
    assert "Pick the port." in asking[1]["content"]
    assert tool_texts(srv.requests[2]) == [
        "Nobody answered in time; a model (openai/fake-model) answered for them: Use 8443, with TLS."]
    assert done.data["outcome"] == "completed"


async def test_a_filesystem_servers_write_waits_for_approval_shown_with_its_arguments(tmp_path: Path,
                                                                                    srv: FakeLLM) -> None:
    need_npm_servers()
    cfg = config(tmp_path, srv, coder='mcp = ["fs"]\napprove_tools = ["fs.write_file"]', extra="""
[http]
listen = "127.0.0.1:0"

[mcp.servers.fs]
command = "mcp-server-filesystem"
args = ["."]
""")
    srv.script(tool_call("fs__write_file", {"path": "/etc/motd", "content": "hi"}),
               tool_call("fs__write_file", {"path": "NOTES.md", "content": "approved\n"}), text("wrote NOTES.md"))
    task = {"title": "Note", "description": "Write NOTES.md.", "assignTo": "coder",
            "expectations": [{"type": "file_exists", "path": "NOTES.md"}]}
    async with running_daemon(cfg) as (daemon, w):
        submit(cfg, "fs.json", mission_json(task))
        first = await w.wait_event("approval:requested", timeout=90)
        assert daemon.http is not None
        async with httpx.AsyncClient(base_url=daemon.http.url) as client:
            seen = (await client.get("/api/tasks/fs:1")).json()
            rejected = await client.post("/api/tasks/fs:1/reject", json={"reason": "not outside the workspace"})
            second = await w.wait_for(lambda e: e.event == "approval:requested" and e.seq > first.seq, 60)
            approved = await client.post("/api/tasks/fs:1/approve", json={"by": "erin"})
            done = await w.wait_event("mission:completed", timeout=90)
            metrics = (await client.get("/metrics")).text
    assert first.data["tool"] == "fs.write_file" and first.data["arguments"] == {"path": "/etc/motd", "content": "hi"}
    assert first.data["approve"] == "polpo approve fs:1"
    assert seen["status"] == "awaiting_approval"
    assert seen["questions"][0]["arguments"] == {"path": "/etc/motd", "content": "hi"}
    assert rejected.status_code == 200 and approved.status_code == 200
    assert second.data["arguments"] == {"path": "NOTES.md", "content": "approved\n"}
    assert done.data["outcome"] == "completed"
    assert (cfg.state_dir / "workspaces" / "fs" / "NOTES.md").read_text() == "approved\n"
    refusal = [t for r in srv.requests for t in tool_texts(r) if "refused" in t]
    assert refusal and refusal[0] == "Error: a person refused this call (api): not outside the workspace"
    assert [e.data["status"] for e in w.of("approval:resolved")] == ["rejected", "approved"]
    assert 'polpo_tool_approvals_total{status="approved"} 1.0' in metrics
    assert 'polpo_tool_approvals_total{status="rejected"} 1.0' in metrics
    assert 'polpo_mcp_calls_total{outcome="ok",server="fs"} 1.0' in metrics
