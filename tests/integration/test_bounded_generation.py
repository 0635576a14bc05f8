"""Every model call carries ``max_tokens``: the agent's turns (``[agents.X] max_tokens``), and the judge's
dimension generator, reviewers (both phases) and expectation judge (``[judge] max_tokens``), in a real daemon
against a FakeLLM in llama-cpp-python's strict mode."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from polpo.config import load_config
from tests.support.daemon import mission_json, running_daemon, submit, write_config
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, text, tool_call
from tests.support.judges import ScriptedJudge, phase

pytestmark = pytest.mark.anyio


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv("POLPO_TEST_BOUND_KEY", "sk-bound-0a1b2c3d4e5f")
    with FakeLLM(models=("agent-model", "judge-model"), strict="llama-cpp") as server:
        yield server


async def test_max_tokens_is_sent_on_every_agent_and_judge_call(tmp_path: Path, srv: FakeLLM) -> None:
    judge = ScriptedJudge(judge_reply=json.dumps({"corrections": [
        {"index": 1, "verdict": "expectation_wrong", "reason": "the task asks for result.txt",
         "fix": {"command": "test -f result.txt"}}]}))

    def respond(req: RecordedRequest) -> Reply:
        if req["model"] == "agent-model":
            done = req["messages"][-1]["role"] == "tool"
            return text("wrote result.txt") if done else tool_call("write_file", {"path": "result.txt", "content": "42"})
        return judge(req)

    srv.responder = respond
    cfg = load_config(write_config(tmp_path, agents=f"""
[agents.coder]
type = "llm"
model = "openai/agent-model"
api_base = "{srv.base_url}"
max_tokens = 777
""", extra=f"""
[judge]
model = "openai/judge-model"
api_base = "{srv.base_url}"
api_key_env = "POLPO_TEST_BOUND_KEY"
max_tokens = 555

[llm]
max_retries = 0
"""))
    task = {"title": "Write result", "description": "Write 42 into result.txt.", "assignTo": "coder",
            "expectations": [{"type": "file_exists", "path": "result.txt"},
                             {"type": "test", "command": "test -f results.txt"},
                             {"type": "llm_review", "criteria": "result.txt holds 42", "threshold": 3.0}]}
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "bound.json", mission_json(task))
        done = await w.wait_event("mission:completed", timeout=60)
    assert done.data["outcome"] == "completed"
    assert srv.refusals == [] and srv.unscripted == 0
    agent = [r for r in srv.requests if r["model"] == "agent-model"]
    judged = [r for r in srv.requests if r["model"] == "judge-model"]
    assert len(agent) >= 2 and {r["max_tokens"] for r in agent} == {777}
    kinds = {phase(r) for r in judged}
    assert {"judge", "dimensions", "explore", "json"} <= kinds, kinds
    assert all(r.get("max_tokens") == 555 for r in judged), [(phase(r), r.get("max_tokens")) for r in judged]
