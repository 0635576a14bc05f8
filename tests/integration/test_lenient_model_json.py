"""A small model's JSON slips, over real HTTP: the reviewer's ``submit_review`` arguments HTML-escaped with a
stray space in a dimension name (as Qwen2.5-Coder-0.5B wrote them), and an agent's ``write_file`` arguments with
a raw newline inside the content string."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from polpo.llm.client import LLMClient, ModelSettings, load_litellm
from polpo.review import score_prompts
from polpo.review.dimensions import Dim
from polpo.review.reviewer import ReviewContext, run_reviewer
from tests.integration.test_llm_agent import make_agent, make_request, run
from tests.support.fake_llm import FakeLLM, text, tool_call

pytestmark = pytest.mark.anyio

DIMS = [Dim("correctness", 0.6, "It works"), Dim("clarity", 0.4, "It reads well")]


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv("POLPO_TEST_FAKE_LLM_KEY", "sk-test-abc123def456ghi789")
    with FakeLLM(strict="llama-cpp") as server:
        yield server


async def test_an_html_escaped_submit_review_with_a_stray_space_is_read_by_the_forced_strategy(
    srv: FakeLLM, tmp_path: Path
) -> None:
    escaped = ("{&#34;scores&#34;: [{&#34;dimension&#34;: &#34; correctness&#34;, &#34;score&#34;: 4, "
               "&#34;reasoning&#34;: &#34;it&#39;s right&#34;}, {&#34;dimension&#34;: &#34;Clarity&#34;, "
               "&#34;score&#34;: 3, &#34;reasoning&#34;: &#34;fine&#34;,}], &#34;summary&#34;: &#34;ok&#34;}")
    srv.script(text("correctness: right. clarity: fine."), text("I scored it: good."),
               tool_call(score_prompts.SUBMIT_REVIEW, escaped))
    await load_litellm()
    ctx = ReviewContext(title="t", description="d", criteria="c", workspace=tmp_path, files_changed=[],
                        timeline="agent ran; exit 0")
    settings = ModelSettings("openai/fake-model", api_base=srv.base_url, timeout=10)
    trace = await run_reviewer(LLMClient(max_retries=0), settings, index=0, ctx=ctx, dims=DIMS)
    assert trace.ok, trace.strategy_errors
    assert trace.strategy == "forced_tool" and trace.strategy_errors == ["json_text: no JSON object in the reply"]
    assert [(s.dimension, s.score, s.reasoning) for s in trace.scores] == [
        ("correctness", 4.0, "it's right"), ("clarity", 3.0, "fine")]
    assert len(srv.requests) == 3 and srv.requests[2]["tool_choice"] == "required"


@pytest.mark.parametrize("strict", ["llama-cpp", "ollama"])
async def test_a_raw_newline_in_write_file_content_writes_the_file(strict: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLPO_TEST_FAKE_LLM_KEY", "sk-test-abc123def456ghi789")
    ws = tmp_path / "ws"
    ws.mkdir()
    with FakeLLM(strict=strict) as srv:
        await _write_with_a_raw_newline(srv, ws)


async def _write_with_a_raw_newline(srv: FakeLLM, ws: Path) -> None:
    srv.script(tool_call("write_file", '{"path": "hello.py", "content": "print(1)\nprint(2)\n"}'), text("done"))
    result, _ = await run(make_agent(srv), make_request(ws))
    assert result.ok and (ws / "hello.py").read_text() == "print(1)\nprint(2)\n"
    tool = [e for e in result.transcript or [] if e["type"] == "tool"]
    assert tool[0]["ok"] is True
    # replayed to the server as strict JSON (Ollama refuses others); the transcript keeps what the model wrote
    replayed = srv.requests[1]["messages"][2]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(replayed) == {"path": "hello.py", "content": "print(1)\nprint(2)\n"}
    assert "\n" in (result.transcript or [])[0]["toolCalls"][0]["arguments"]
    assert srv.refusals == []


async def test_a_renamed_dimension_gets_one_repair_turn_that_names_the_expected_ones(
    srv: FakeLLM, tmp_path: Path
) -> None:
    renamed = {"scores": [{"dimension": "functionality", "score": 4, "reasoning": "works"},
                          {"dimension": "clarity", "score": 3, "reasoning": "ok"}], "summary": "s"}
    right = {"scores": [{"dimension": "correctness", "score": 4, "reasoning": "works"},
                        {"dimension": "clarity", "score": 3, "reasoning": "ok"}], "summary": "s"}
    srv.script(text("correctness: works. clarity: ok."), text(json.dumps(renamed)),
               tool_call(score_prompts.SUBMIT_REVIEW, right))
    await load_litellm()
    ctx = ReviewContext(title="t", description="d", criteria="c", workspace=tmp_path, files_changed=[],
                        timeline="agent ran; exit 0")
    settings = ModelSettings("openai/fake-model", api_base=srv.base_url, timeout=10)
    trace = await run_reviewer(LLMClient(max_retries=0), settings, index=0, ctx=ctx, dims=DIMS)
    assert trace.ok and trace.strategy == "forced_tool" and trace.ignored_dimensions == []
    assert [s.dimension for s in trace.scores] == ["correctness", "clarity"]
    repair = srv.requests[2]["messages"][-1]
    assert repair["role"] == "user" and "missing score for correctness" in repair["content"]
    assert "functionality" in repair["content"]
    assert "exactly as spelled here and no others: correctness, clarity" in repair["content"]
