"""A reviewer against llama.cpp's own server, as issue 32 measured it (FakeLLM ``strict="llama-server"`` over real
HTTP): no forced tool choice in the object form it ignores, malformed tool-call arguments never sent back, its
"does not match the expected format" 500 at temperature 0 not generated again, and a reply cut off at
``max_tokens`` after a complete ``scores`` array still read."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from polpo.llm.client import LLMClient, LLMError, ModelSettings, load_litellm
from polpo.review import score_prompts
from polpo.review.dimensions import Dim
from polpo.review.reviewer import ReviewContext, run_reviewer
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, error, score_logprobs, text, tool_call
from tests.support.judges import phase

pytestmark = pytest.mark.anyio

DIMS = [Dim("correctness", 0.6, "It works"), Dim("tests", 0.4, "It is tested")]
ANALYSIS = "correctness: add() is right (calc.py:2). tests: one test of add (test_calc.py:4)."
PEG = ("The model produced output that does not match the expected peg-native format: "
       "<tool_call>{\"name\": \"submit_review\", \"arguments\": {\"scores\": [")
CUT = '{"scores": [{"dimension": "correctness", "score": 4,'


def scores(correctness: float = 4, tests: float = 3) -> dict[str, Any]:
    return {"scores": [{"dimension": "correctness", "reasoning": "add is right (calc.py:2)", "score": correctness},
                       {"dimension": "tests", "reasoning": "one test (test_calc.py:4)", "score": tests}],
            "summary": "right, thinly tested"}


@pytest.fixture
async def llama() -> AsyncIterator[FakeLLM]:
    await load_litellm()
    with FakeLLM(strict="llama-server") as server:
        yield server
        assert server.errors == [] and server.unscripted == 0


def settings(srv: FakeLLM, temperature: float | None = 0) -> ModelSettings:
    return ModelSettings("openai/qwen", api_base=srv.base_url, timeout=60, temperature=temperature)


def context(ws: Path, files: list[str] | None = None) -> ReviewContext:
    return ReviewContext(title="Calculator", description="Write add() with a test.", criteria="add works.",
                         workspace=ws, files_changed=files or [], timeline="agent ran; exit 0")


def workspace(tmp_path: Path) -> Path:
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (tmp_path / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n")
    return tmp_path


async def test_a_malformed_submit_review_then_a_valid_one_is_scored_without_a_refusal(
        llama: FakeLLM, tmp_path: Path) -> None:
    def answer(req: RecordedRequest) -> Reply:
        p = phase(req)
        return {"output": text(ANALYSIS), "json": text("The work looks fine to me."),
                "forced": tool_call(score_prompts.SUBMIT_REVIEW, CUT, id="call_cut"),
                "auto": tool_call(score_prompts.SUBMIT_REVIEW, scores())}[p]
    llama.responder = answer

    trace = await run_reviewer(LLMClient(max_retries=0), settings(llama), index=0, ctx=context(tmp_path), dims=DIMS)

    assert trace.ok, trace.strategy_errors
    assert trace.strategy == "auto_tool" and [s.score for s in trace.scores] == [4, 3]
    assert [phase(r) for r in llama.requests] == ["output", "json", "forced", "auto"]
    assert llama.refusals == []  # every request was one llama-server takes
    assert all(not isinstance(r.get("tool_choice"), dict) for r in llama.requests)
    assert llama.requests[2]["tool_choice"] == "required"
    repair = llama.requests[3]["messages"]
    sent_back = next(m for m in repair if m.get("tool_calls"))
    assert sent_back["tool_calls"][0]["function"]["arguments"] == "{}"  # strict JSON, not the cut text
    assert repair[-1] == {"role": "tool", "tool_call_id": "call_cut", "content": repair[-1]["content"]}
    assert "rejected" in repair[-1]["content"]
    kept = next(m for m in trace.messages if m.get("toolCalls"))
    assert kept["toolCalls"][0]["arguments"] == CUT  # the trace keeps what the model wrote


async def test_a_malformed_tool_call_while_exploring_is_not_sent_back(llama: FakeLLM, tmp_path: Path) -> None:
    def answer(req: RecordedRequest) -> Reply:
        p = phase(req)
        if p == "explore":
            turns = sum(1 for m in req["messages"] if m["role"] == "assistant")
            return tool_call("read_file", '{"path": "calc.py"', id="call_bad") if turns == 0 else text(ANALYSIS)
        return text(json.dumps(scores()))
    llama.responder = answer

    trace = await run_reviewer(LLMClient(max_retries=0), settings(llama), index=0,
                               ctx=context(workspace(tmp_path), ["calc.py", "test_calc.py"]), dims=DIMS)

    assert trace.ok, trace.error
    assert llama.refusals == [] and [phase(r) for r in llama.requests] == ["explore", "explore", "json"]
    second = llama.requests[1]["messages"]
    assert next(m for m in second if m.get("tool_calls"))["tool_calls"][0]["function"]["arguments"] == "{}"
    result = next(m for m in trace.messages if m["role"] == "tool")
    assert result["isError"] is True and result["toolName"] == "read_file"


@pytest.mark.parametrize("temperature", [0, 0.7])
async def test_a_turn_the_server_cannot_parse_while_exploring_leaves_the_analysis_asked_without_tools(
        llama: FakeLLM, tmp_path: Path, temperature: float) -> None:
    """The 1.5B reviewer of a correct `histogram`: its first exploring turn failed llama-server's tool-call
    parser, and the whole review was lost. At temperature 0 that request is not sent again (and sampled, its
    retries fail too); the analysis is asked for at once, with tools off, and the review goes on."""
    def answer(req: RecordedRequest) -> Reply:
        p = phase(req)
        if p == "explore" and req.get("tool_choice") != "none":
            return error(500, {"error": {"code": 500, "message": PEG, "type": "server_error"}})
        return text(ANALYSIS) if p == "explore" else text(json.dumps(scores(5, 4)))
    llama.responder = answer

    trace = await run_reviewer(LLMClient(max_retries=1, backoff=0.01), settings(llama, temperature), index=0,
                               ctx=context(workspace(tmp_path), ["calc.py"]), dims=DIMS, max_turns=4)

    assert trace.ok, trace.error
    assert [s.score for s in trace.scores] == [5, 4] and trace.analysis == ANALYSIS
    asked = [r.get("tool_choice") for r in llama.requests if phase(r) == "explore"]
    assert asked[-1] == "none" and set(asked[:-1]) == {"auto"}  # one failed turn (twice when sampled), then none
    (note,) = [e for e in trace.strategy_errors if e.startswith("explore:")]
    assert note.startswith("explore: turn 1: ") and note.endswith("the analysis was asked for without tools")


async def test_a_format_500_at_temperature_0_is_bad_output_and_not_generated_again(llama: FakeLLM) -> None:
    llama.responder = lambda req: error(500, {"error": {"code": 500, "message": PEG, "type": "server_error"}})
    client = LLMClient(max_retries=3, backoff=0.01)
    with pytest.raises(LLMError) as caught:
        await client.chat(settings(llama, 0), [{"role": "user", "content": "score it"}])
    assert caught.value.kind == "bad_output" and caught.value.attempts == 1
    assert "at temperature 0 the model answers the same request the same way" in caught.value.message
    assert len(llama.requests) == 1  # one generation, not four

    with pytest.raises(LLMError) as caught:  # sampled above 0, another try may be parsed: retried as before
        await client.chat(settings(llama, 0.7), [{"role": "user", "content": "score it again"}])
    assert caught.value.kind == "repeated_error" and caught.value.attempts == 2
    assert len(llama.requests) == 3


async def test_a_reviewer_moves_on_from_a_format_500_to_the_next_strategy(llama: FakeLLM, tmp_path: Path) -> None:
    def answer(req: RecordedRequest) -> Reply:
        p = phase(req)
        if p == "json":
            return error(500, {"error": {"code": 500, "message": PEG, "type": "server_error"}})
        return text(ANALYSIS) if p == "output" else tool_call(score_prompts.SUBMIT_REVIEW, scores(5, 4))
    llama.responder = answer

    trace = await run_reviewer(LLMClient(max_retries=3, backoff=0.01), settings(llama), index=0,
                               ctx=context(tmp_path), dims=DIMS)

    assert trace.ok and trace.strategy == "forced_tool" and [s.score for s in trace.scores] == [5, 4]
    assert trace.strategy_errors[0].startswith("json_text: bad_output: ")
    assert [phase(r) for r in llama.requests] == ["output", "json", "forced"]


async def test_a_reply_cut_off_after_a_complete_scores_array_is_read(llama: FakeLLM, tmp_path: Path) -> None:
    whole = json.dumps(scores(4, 2))
    cut = whole[:whole.index('"summary"') + len('"summary": "right, thin')]
    llama.script(text(ANALYSIS), text(cut, finish_reason="length"))

    trace = await run_reviewer(LLMClient(max_retries=0), settings(llama), index=0, ctx=context(tmp_path), dims=DIMS)

    assert trace.ok and trace.strategy == "json_text" and trace.strategy_errors == []
    assert [(s.dimension, s.score) for s in trace.scores] == [("correctness", 4), ("tests", 2)]
    assert trace.summary == "" and len(llama.requests) == 2


async def test_a_reply_cut_off_inside_the_scores_keeps_what_was_complete_and_asks_for_the_rest(
        llama: FakeLLM, tmp_path: Path) -> None:
    whole = json.dumps(scores(4, 2))
    llama.script(text(ANALYSIS), text(whole[:whole.index('"tests"')], finish_reason="length"),
                 tool_call(score_prompts.SUBMIT_REVIEW, scores(1, 3)))

    trace = await run_reviewer(LLMClient(max_retries=0), settings(llama), index=0, ctx=context(tmp_path), dims=DIMS)

    assert trace.ok and trace.strategy == "forced_tool"
    # correctness's object was complete: it stands, and the second reply's other correctness is not counted
    assert [(s.dimension, s.score) for s in trace.scores] == [("correctness", 4), ("tests", 3)]
    assert trace.ignored_dimensions == []
    (why,) = trace.strategy_errors  # the model is told why, and asked for what is missing only
    assert why.startswith("json_text: the reply was cut off at its token limit before the scores were complete")
    repair = llama.requests[2]["messages"][-1]["content"]
    assert "Your scores for correctness were complete and stand" in repair and "scoring only: tests;" in repair


async def test_a_reviewer_looping_in_its_last_reasoning_is_scored_from_two_replies(
        llama: FakeLLM, tmp_path: Path) -> None:
    """Issue 32's 1.5B reviewer of change_base: the last dimension's reasoning repeated itself until
    ``max_tokens``, on every strategy, and the review was lost. The finished scores keep their own reply's
    log-probabilities; the one asked for after is weighed by its own."""
    loop = "It handles the case where x is greater than the base. " * 40
    first = ('{"scores": [{"dimension": "correctness", "reasoning": "E1 passed (calc.py:2)", "score": 4}, '
             '{"dimension": "tests", "reasoning": "' + loop)
    second = json.dumps({"scores": [{"dimension": "tests", "reasoning": "one test (test_calc.py:4)", "score": 2}]})

    def answer(req: RecordedRequest) -> Reply:
        if phase(req) == "output":
            return text(ANALYSIS)
        if len(req["messages"]) == 2:  # the first scoring request: its system and user messages
            return text(first, finish_reason="length", logprobs=score_logprobs(first, [{4: 0.5, 5: 0.5}]))
        return tool_call(score_prompts.SUBMIT_REVIEW, second)
    llama.responder = answer

    trace = await run_reviewer(LLMClient(max_retries=0), settings(llama), index=0, ctx=context(tmp_path), dims=DIMS)

    assert trace.ok, (trace.error, trace.strategy_errors, len(llama.requests))
    assert [(s.dimension, s.score, s.sampled) for s in trace.scores] == \
        [("correctness", 4.5, 4), ("tests", 2, None)]
    assert trace.score_source == "mixed" and len(llama.requests) == 3


async def test_a_reply_cut_off_before_any_score_was_complete_is_asked_again_whole(
        llama: FakeLLM, tmp_path: Path) -> None:
    llama.script(text(ANALYSIS), text(CUT, finish_reason="length"), tool_call(score_prompts.SUBMIT_REVIEW, scores()))

    trace = await run_reviewer(LLMClient(max_retries=0), settings(llama), index=0, ctx=context(tmp_path), dims=DIMS)

    assert trace.ok and [s.score for s in trace.scores] == [4, 3]
    repair = llama.requests[2]["messages"][-1]["content"]
    assert "cut off at its token limit" in repair and "correctness, tests." in repair
