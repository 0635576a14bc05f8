"""No request overflows a small model's context: the agent and the judge of a real daemon, configured with
``context_window``, against a FakeLLM that refuses (HTTP 400) any request whose prompt plus ``max_tokens`` exceeds
its 4096-token context, on a task with a long description and big files read by the agent and the reviewers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from polpo.config import load_config
from polpo.llm.client import LLMClient, LLMError, ModelSettings
from tests.support.daemon import mission_json, running_daemon, submit, write_config
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, text, tool_call
from tests.support.judges import ScriptedJudge, phase

pytestmark = pytest.mark.anyio
WINDOW = 4096
MARK = "characters trimmed to fit the model's context"


@pytest.fixture
def srv() -> Iterator[FakeLLM]:
    with FakeLLM(models=("agent-model", "judge-model"), context_window=WINDOW) as server:
        yield server


def tool_results(req: RecordedRequest) -> int:
    return sum(1 for m in req["messages"] if m["role"] == "tool")


def agent_turn(req: RecordedRequest) -> Reply:
    steps = [tool_call("run_command", {"command": "seq 1 40000 > big.txt"}),
             tool_call("read_file", {"path": "big.txt"}),
             tool_call("write_file", {"path": "result.txt", "content": "counted"})]
    n = tool_results(req)
    return steps[n] if n < len(steps) else text("big.txt written and read; result.txt says counted")


async def test_no_request_from_the_agent_or_the_judge_overflows_a_small_context(tmp_path: Path,
                                                                              srv: FakeLLM) -> None:
    judge = ScriptedJudge(score=4)

    def respond(req: RecordedRequest) -> Reply:
        if req["model"] == "agent-model":
            return agent_turn(req)
        if phase(req) == "explore" and tool_results(req) == 0:
            return tool_call("read_file", {"path": "big.txt"})  # a reviewer reads the big file too
        return judge(req)

    srv.responder = respond
    cfg = load_config(write_config(tmp_path, agents=f"""
[agents.coder]
type = "llm"
model = "openai/agent-model"
api_base = "{srv.base_url}"
context_window = {WINDOW}
max_tokens = 512
""", extra=f"""
[judge]
model = "openai/judge-model"
api_base = "{srv.base_url}"
context_window = {WINDOW}
max_tokens = 512
"""))
    spec = "\n".join(f"Requirement {i}: the count must include line {i} exactly once." for i in range(600))
    task = {"title": "Count", "description": "Write the numbers 1..40000 to big.txt, read it back, then write "
                                              f"'counted' to result.txt.\n\n{spec}", "assignTo": "coder",
            "expectations": [{"type": "file_exists", "path": "result.txt"},
                             {"type": "llm_review", "criteria": "big.txt holds 1..40000", "threshold": 3.0}]}
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "m.json", mission_json(task))
        done = await w.wait_event("mission:completed", timeout=90)
    assert srv.refusals == [], [(status, phase(req)) for status, req in srv.refusals]
    assert done.data["outcome"] == "completed"
    agent = [r for r in srv.requests if r["model"] == "agent-model"]
    judged = [r for r in srv.requests if r["model"] == "judge-model"]
    assert len(agent) == 4 and {"dimensions", "explore", "json"} <= {phase(r) for r in judged}
    # the big pieces were there and were trimmed, visibly: the task description, the file the agent read, the
    # file each reviewer read
    assert MARK in agent[0]["messages"][1]["content"]
    assert any(MARK in m["content"] for m in agent[2]["messages"] if m["role"] == "tool")
    assert any(MARK in str(m.get("content")) for r in judged if phase(r) == "explore" for m in r["messages"]
               if m["role"] == "tool")
    assert max(srv.prompt_tokens) > WINDOW // 2  # the requests did use the room they had


async def test_a_request_that_cannot_fit_even_trimmed_is_not_sent(srv: FakeLLM) -> None:
    client = LLMClient(max_retries=0)
    settings = ModelSettings("openai/agent-model", api_base=srv.base_url, context_window=1024, max_tokens=256)
    call = {"role": "assistant", "content": "", "tool_calls": [  # tool-call arguments are never trimmed
        {"id": "c1", "type": "function", "function": {"name": "write_file",
                                                      "arguments": json.dumps({"content": "z" * 6000})}}]}
    with pytest.raises(LLMError) as err:
        await client.chat(settings, [{"role": "user", "content": "go"}, call,
                                     {"role": "tool", "tool_call_id": "c1", "content": "ok"}])
    assert err.value.kind == "context_overflow" and "not sent" in err.value.message
    assert "context window is 1024 tokens" in err.value.message and "max_tokens" in err.value.message
    assert srv.requests == []


async def test_litellm_s_context_window_of_a_known_model_is_used_when_none_is_configured() -> None:
    client = LLMClient(max_retries=0)
    huge = "word " * 200_000  # 1 000 000 characters: more than gpt-4o-mini's 128 000 tokens
    with FakeLLM() as big:
        big.script(text("ok"))
        await client.chat(ModelSettings("openai/gpt-4o-mini", api_base=big.base_url),
                          [{"role": "user", "content": huge}])
        sent = big.last_request["messages"][0]["content"]
    assert MARK in sent and len(sent) < len(huge)
