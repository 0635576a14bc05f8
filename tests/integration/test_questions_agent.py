"""The LLM agent that stops to ask a person (ask_human, a call approve_tools names) and goes on from where it stopped
when the answer comes, its model played by FakeLLM over real HTTP: what it records, what the model sees once, and
an approved call that runs once — never again after a crash."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from polpo.agents.base import AgentRequest, AgentResult
from polpo.agents.llm import LLMAgent
from polpo.agents.llm_calls import RUNNING
from polpo.clock import SystemClock
from polpo.llm.client import LLMClient, ModelSettings, load_litellm
from polpo.model.questions import Question, QuestionKind, QuestionStatus
from tests.support.fake_llm import FakeLLM, text, tool_call, tool_calls

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("fake_llm_key")]

KEY_ENV = "POLPO_TEST_FAKE_LLM_KEY"


def agent(srv: FakeLLM, **kwargs: Any) -> LLMAgent:
    settings = ModelSettings("openai/fake-model", api_base=srv.base_url, api_key_env=KEY_ENV, timeout=10.0)
    return LLMAgent("coder", settings, client=LLMClient(backoff=0.01), clock=SystemClock(), **kwargs)


def request(ws: Path, **changes: Any) -> AgentRequest:
    base = AgentRequest(task_id="m:1", mission_id="m", mission_name="Web", attempt_id="m:1/1", attempt_number=1,
                        kind="initial", title="Serve it", description="Write port.txt with the port to serve on.",
                        prompt="", feedback=None, workspace=ws, timeout=30.0, expectations=[],
                        env_marker=("POLPO_TEST_MARK", "q|m:1/1"), questions_left=2)
    return dataclasses.replace(base, **changes)


async def run(a: LLMAgent, req: AgentRequest) -> AgentResult:
    await load_litellm()
    return await a.run(req, on_start=lambda pid: None)


def answered(r: AgentResult, **fields: Any) -> Question:
    assert r.asks is not None
    return Question("m:1/1/q", "m:1", "m", "m:1/1", r.asks.kind, r.asks.source, r.asks.text,
                    datetime.now(UTC), status=QuestionStatus.ANSWERED, arguments=r.asks.arguments,
                    snapshot=json.loads(json.dumps(r.asks.snapshot)), **fields)


class Deliveries:
    def __init__(self) -> None:
        self.seen: list[str | None] = []

    async def __call__(self, result: str | None) -> None:
        self.seen.append(result)


def tool_results(srv: FakeLLM) -> list[str]:
    return [m["content"] for m in srv.requests[-1]["messages"] if m["role"] == "tool"]


async def test_ask_human_stops_the_attempt_and_the_answer_goes_on_from_there(srv_ws: tuple[FakeLLM, Path]) -> None:
    srv, ws = srv_ws
    srv.script(tool_call("read_file", {"path": "README"}), tool_call("ask_human", {"question": "Which port?"}))
    a = agent(srv, ask_human=True)
    first = await run(a, request(ws))
    assert first.ok and first.asks is not None
    assert (first.asks.kind, first.asks.source, first.asks.text) == (QuestionKind.QUESTION, "ask_human", "Which port?")
    assert first.stdout_tail == "waiting for a person's answer: Which port?"
    assert [t["function"]["name"] for t in srv.requests[0]["tools"]][-1] == "ask_human"
    assert "ask_human asks the person who runs the mission" in srv.requests[0]["messages"][0]["content"]
    assert [e["type"] for e in first.transcript or []][-1] == "question"
    assert len(srv.requests) == 2

    srv.script(tool_call("write_file", {"path": "port.txt", "content": "8080\n"}), text("port.txt says 8080"))
    deliveries = Deliveries()
    q = answered(first, answer="8080", answered_by="alice")
    second = await run(a, request(ws, attempt_id="m:1/2", attempt_number=2, resume=q, deliver=deliveries))
    assert second.ok and second.stdout_tail == "port.txt says 8080"
    assert (ws / "port.txt").read_text() == "8080\n"
    assert deliveries.seen == [None]  # recorded as received before the conversation went on
    results = tool_results(srv)
    assert results[1] == "alice answered: 8080"  # the ask_human call's result, in its place
    assert sum("alice answered: 8080" in r for r in results) == 1  # once
    sent = srv.requests[2]["messages"]  # the conversation went on from the snapshot, not from the start
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert (second.transcript or [])[0]["type"] == "answer"


async def test_a_call_approve_tools_names_waits_runs_once_when_approved_and_never_after_a_crash(
        srv_ws: tuple[FakeLLM, Path]) -> None:
    srv, ws = srv_ws
    cmd = "echo deployed >> deploys.log"
    srv.script(tool_calls([("list_dir", {"path": "."}), ("run_command", {"command": cmd}),
                           ("write_file", {"path": "after.txt", "content": "x"})]))
    a = agent(srv, approve_tools=["run_command"])
    first = await run(a, request(ws))
    assert first.asks is not None and first.asks.kind is QuestionKind.TOOL
    assert first.asks.text == "run_command" and first.asks.arguments == {"command": cmd}
    assert not (ws / "deploys.log").exists() and not (ws / "after.txt").exists()
    assert [c["name"] for c in (first.asks.snapshot or {})["pending"]] == ["run_command", "write_file"]

    srv.script(text("deployed"))
    deliveries = Deliveries()
    second = await run(a, request(ws, attempt_id="m:1/2", resume=answered(first, approved=True, answered_by="bob"),
                                  deliver=deliveries))
    assert second.ok
    assert (ws / "deploys.log").read_text() == "deployed\n" and (ws / "after.txt").exists()  # the rest of the turn
    assert deliveries.seen[0] == RUNNING and "exit code 0" in str(deliveries.seen[1])

    # the daemon died after the approved call started: the next attempt does not run it again
    srv.script(text("checked"))
    third = await run(a, request(ws, attempt_id="m:1/3", resume=answered(first, approved=True, answered_by="bob",
                                                                          result=RUNNING), deliver=Deliveries()))
    assert third.ok and (ws / "deploys.log").read_text() == "deployed\n"
    assert any("the daemon stopped while this approved call ran" in r for r in tool_results(srv))


async def test_a_refused_call_is_the_models_error_and_no_more_questions_than_allowed(
        srv_ws: tuple[FakeLLM, Path]) -> None:
    srv, ws = srv_ws
    srv.script(tool_call("run_command", {"command": "rm -rf build"}), text("left it"))
    a = agent(srv, approve_tools=["run_*"], ask_human=True)
    first = await run(a, request(ws))
    q = answered(first, approved=False, answered_by="carol", answer="never delete build/")
    second = await run(a, request(ws, resume=q, deliver=Deliveries()))
    assert second.ok
    assert "Error: a person refused this call (carol): never delete build/" in tool_results(srv)
    srv.script(tool_call("ask_human", {"question": "May I?"}), text("decided myself"))
    third = await run(a, request(ws, questions_left=0))
    assert third.ok and third.asks is None
    assert "this task may ask no more questions" in tool_results(srv)[-1]


@pytest.fixture
def srv_ws(tmp_path: Path) -> Any:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README").write_text("serve on the usual port\n")
    with FakeLLM() as srv:
        yield srv, ws
