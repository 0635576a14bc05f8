"""The review panel, reviewers, dimension generation and expectation judge against FakeLLM over real HTTP.

Three reviewers run concurrently, so replies are chosen by a responder that looks at each request: which phase
it belongs to (tools offered, tool_choice, system prompt) and which reviewer sent it (each reviewer gets its own
model name: ``openai/fake-a``, ``fake-b``, ``fake-c``).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from polpo.assessment.judge import judge_expectations
from polpo.checks.llm_review import LlmReviewExpectation
from polpo.llm.client import LLMClient, ModelSettings
from polpo.review import score_prompts
from polpo.review.dimensions import (
    DEFAULT_DIMENSIONS,
    Dim,
    choose,
    generate_dimensions,
    generate_dimensions_traced,
)
from polpo.review.panel import ReviewContext, run_panel
from polpo.review.reviewer import ReviewerTrace, run_reviewer
from polpo.review.submission import validate_submission
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, delay, error, text, tool_call, tool_calls
from tests.support.judges import phase

pytestmark = pytest.mark.anyio

KEY_ENV = "POLPO_REVIEW_TEST_KEY"
KEY = "sk-review-test-0123456789abcdef"
DIMS = [Dim("correctness", 0.6, "It works"), Dim("tests", 0.4, "It is tested")]
ANALYSIS = "correctness: add() is right (src/calc.py:1). tests: one test (tests/test_calc.py:1)."


# ------------------------------------------------------------------------------------------------ set-up


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv(KEY_ENV, KEY)
    with FakeLLM(models=("fake-a", "fake-b", "fake-c")) as server:
        yield server
        assert server.errors == []


@pytest.fixture
def client() -> LLMClient:
    return LLMClient(max_retries=0)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "src" / "calc.py").write_text("def add(a, b):\n    return a + b\n\n\ndef div(a, b):\n    return a / b\n")
    (root / "tests" / "test_calc.py").write_text("from src.calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n")
    return root


def model(srv: FakeLLM, name: str = "fake-a") -> ModelSettings:
    return ModelSettings(f"openai/{name}", api_base=srv.base_url, api_key_env=KEY_ENV, timeout=10)


def panel_models(srv: FakeLLM) -> list[ModelSettings]:
    return [model(srv, n) for n in ("fake-a", "fake-b", "fake-c")]


def context(ws: Path, files: list[str] | None = None, timeline: str = "agent ran; exit 0") -> ReviewContext:
    return ReviewContext(title="Calculator", description="Write add() and div() with tests.",
                         criteria="Both functions work and are tested.", workspace=ws,
                         files_changed=["src/calc.py", "tests/test_calc.py"] if files is None else files,
                         timeline=timeline, attempt=1)


def payload(scores: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    return {"scores": [{"dimension": d, "score": s, "reasoning": f"{d} is {s}",
                        "evidence": [{"file": "src/calc.py", "line": 5, "note": "div by zero unhandled"}]}
                       for d, s in scores.items()],
            "summary": "Works, thin tests.", **extra}


def submit(scores: Mapping[str, Any], **extra: Any) -> Reply:
    return tool_call(score_prompts.SUBMIT_REVIEW, payload(scores, **extra))


def answer_json(scores: Mapping[str, Any], **extra: Any) -> Reply:
    """The scoring phase's first strategy: the JSON object as the reply's text."""
    return text(json.dumps(payload(scores, **extra)))


def explorer(steps: list[Reply], final: str = ANALYSIS) -> Callable[[RecordedRequest], Reply]:
    """Phase-1 replies by position in the conversation (the number of assistant turns so far)."""
    def answer(req: RecordedRequest) -> Reply:
        n = sum(1 for m in req["messages"] if m["role"] == "assistant")
        if req.get("tool_choice") == "none" or n >= len(steps):
            return text(final)
        return steps[n]
    return answer


def simple_responder(scores: Mapping[str, Mapping[str, Any]] | Mapping[str, Any]) -> Callable[[RecordedRequest], Reply]:
    """Output-mode analysis then the scores as JSON text; ``scores`` per model name or shared."""
    def answer(req: RecordedRequest) -> Reply:
        p = phase(req)
        if p in ("output", "explore"):
            return text(ANALYSIS)
        if p == "json":
            mine = scores.get(req["model"], scores)
            return answer_json(mine, suggestions=[f"handle b == 0 in div ({req['model']})", "add a div test"])
        raise AssertionError(f"unexpected {p} request")
    return answer


def bodies(srv: FakeLLM) -> list[str]:
    return [json.dumps(r.body) for r in srv.requests]


# ------------------------------------------------------------------------------------------------ one reviewer


async def test_reviewer_explores_with_tools_then_scores_in_json_text(
        srv: FakeLLM, client: LLMClient, ws: Path) -> None:
    explore = explorer([tool_call("read_file", {"path": "src/calc.py"}),
                        tool_calls([("grep", {"pattern": "def test_"}), ("list_dir", {}),
                                    ("read_file", {"path": "missing.py"})])])

    def answer(req: RecordedRequest) -> Reply:
        return explore(req) if phase(req) == "explore" else answer_json({"correctness": 4, "tests": 3})
    srv.responder = answer

    trace = await run_reviewer(client, model(srv), index=0, ctx=context(ws), dims=DIMS)

    assert trace.ok, trace.error
    assert (trace.mode, trace.strategy, trace.strategy_errors, trace.turns) == ("files", "json_text", [], 3)
    assert trace.files_read == ["src/calc.py"]  # the failed read of missing.py does not count
    assert trace.analysis == ANALYSIS
    assert [(s.dimension, s.score) for s in trace.scores] == [("correctness", 4), ("tests", 3)]
    assert trace.scores[0].evidence == [{"file": "src/calc.py", "line": 5, "note": "div by zero unhandled"}]
    assert all(s.cited for s in trace.scores) and not trace.evidence_asked and trace.uncited == []
    assert trace.score_source == "sampled"  # FakeLLM gave no log-probabilities
    assert trace.global_score == pytest.approx(0.6 * 4 + 0.4 * 3)
    assert trace.tokens > 0 and trace.duration > 0

    reqs = srv.requests
    assert [phase(r) for r in reqs] == ["explore"] * 3 + ["json"]
    assert [t["function"]["name"] for t in reqs[0]["tools"]] == ["read_file", "glob", "grep", "list_dir",
                                                                  "run_command"]
    assert reqs[0]["tool_choice"] == "auto"
    assert "   2|     return a + b" in reqs[0]["messages"][1]["content"]  # the changed files, numbered
    tool_msgs = [m for m in reqs[1]["messages"] if m["role"] == "tool"]
    assert "return a + b" in tool_msgs[0]["content"]
    scoring = reqs[3]
    assert "tools" not in scoring and "tool_choice" not in scoring
    assert scoring["messages"][0]["content"] == score_prompts.SCORING_SYSTEM
    assert ANALYSIS in scoring["messages"][1]["content"]
    assert "Score each of these dimensions: correctness, tests." in scoring["messages"][1]["content"]
    assert scoring["logprobs"] is True and scoring["top_logprobs"] == 10  # G-Eval's distributions, if served

    # the trace holds both phases: prompts, replies, tool calls and (marked) tool results
    roles = [(m["phase"], m["role"]) for m in trace.messages]
    assert roles[:2] == [(1, "system"), (1, "user")] and roles[-3:] == [(2, "system"), (2, "user"), (2, "assistant")]
    tools_done = [m for m in trace.messages if m["role"] == "tool"]
    assert [(m["toolName"], m["isError"]) for m in tools_done] == [
        ("read_file", False), ("grep", False), ("list_dir", False), ("read_file", True)]
    assert trace.messages[2]["toolCalls"][0]["name"] == "read_file"
    data = json.loads(json.dumps(trace.to_json()))
    assert data["filesRead"] == ["src/calc.py"] and data["strategy"] == "json_text"
    assert data["scoreSource"] == "sampled"
    assert ReviewerTrace.from_json(data).to_json() == trace.to_json()


async def test_scoring_falls_back_json_then_forced_then_auto_in_one_conversation(
        srv: FakeLLM, client: LLMClient, ws: Path) -> None:
    def answer(req: RecordedRequest) -> Reply:
        p = phase(req)
        if p == "output":
            return text(ANALYSIS)
        if p == "json":
            return text("I would rather not write JSON.")
        if p == "forced":
            return submit({"correctness": 7, "tests": 3})
        if p == "auto":
            return text("Here you go:\n```json\n" + json.dumps(payload({"correctness": 4, "tests": 4.5})) + "\n```")
        raise AssertionError(p)
    srv.responder = answer

    trace = await run_reviewer(client, model(srv), index=2, ctx=context(ws, files=[]), dims=DIMS)

    assert trace.ok, trace.error
    assert trace.strategy == "auto_tool"
    assert [(s.dimension, s.score) for s in trace.scores] == [("correctness", 4), ("tests", 4.5)]
    first, second = trace.strategy_errors
    assert first.startswith("json_text: ") and "no JSON object in the reply" in first
    assert second.startswith("forced_tool: ") and "outside 1..5" in second and "correctness" in second
    reqs = srv.requests
    assert [phase(r) for r in reqs] == ["output", "json", "forced", "auto"]
    assert "tools" not in reqs[1]
    assert reqs[2]["tool_choice"] == "required"  # the string every server takes, never the object form
    assert reqs[3]["tool_choice"] == "auto"
    # one conversation: each request is the one before, its answer and the reason it was rejected
    assert reqs[2]["messages"][:2] == reqs[1]["messages"]
    assert reqs[2]["messages"][2] == {"role": "assistant", "content": "I would rather not write JSON."}
    assert reqs[2]["messages"][3]["role"] == "user" and "rejected" in reqs[2]["messages"][3]["content"]
    assert reqs[3]["messages"][:4] == reqs[2]["messages"]
    assert reqs[3]["messages"][-1]["role"] == "tool" and "outside 1..5" in reqs[3]["messages"][-1]["content"]


async def test_out_of_range_scores_are_rejected_not_clamped(srv: FakeLLM, client: LLMClient, ws: Path) -> None:
    def answer(req: RecordedRequest) -> Reply:
        p = phase(req)
        if p == "output":
            return text(ANALYSIS)
        if p == "json":
            return answer_json({"correctness": 0, "tests": 3})
        if p == "forced":
            return submit({"correctness": 5.5, "tests": 3})
        return submit({"correctness": 4, "tests": 6})
    srv.responder = answer

    trace = await run_reviewer(client, model(srv), index=0, ctx=context(ws, files=[]), dims=DIMS)

    assert not trace.ok and trace.scores == [] and trace.strategy is None
    assert len(trace.strategy_errors) == 3
    assert "score 0 is outside 1..5" in trace.strategy_errors[0]
    assert "score 5.5 is outside 1..5" in trace.strategy_errors[1]
    assert "score 6 is outside 1..5" in trace.strategy_errors[2] and "(tests)" in trace.strategy_errors[2]
    assert trace.error is not None and trace.error.startswith("no valid scores")
    # the tool call was answered with the rejection before the auto strategy was asked
    auto = next(r for r in srv.requests if phase(r) == "auto")
    assert auto["messages"][-1]["role"] == "tool" and "outside 1..5" in auto["messages"][-1]["content"]


async def test_json_in_the_text_of_a_tool_strategy_is_accepted(srv: FakeLLM, client: LLMClient, ws: Path) -> None:
    def answer(req: RecordedRequest) -> Reply:
        p = phase(req)
        if p == "output":
            return text(ANALYSIS)
        if p == "json":
            return text("Scores: correctness four, tests two.")
        return text("```\n" + json.dumps(payload({"correctness": "4", "tests": 2})) + "\n```")
    srv.responder = answer
    trace = await run_reviewer(client, model(srv), index=0, ctx=context(ws, files=[]), dims=DIMS)
    assert trace.ok and trace.strategy == "forced_tool"
    assert [s.score for s in trace.scores] == [4.0, 2.0]


async def test_no_files_changed_means_no_tools_and_the_timeline_inline(
        srv: FakeLLM, client: LLMClient, ws: Path) -> None:
    srv.responder = simple_responder({"correctness": 5, "tests": 4})
    timeline = "[00:01] Tool: send_email(to=bob) → 250 OK\nOUTCOME: email sent to bob"
    trace = await run_reviewer(client, model(srv), index=0, ctx=context(ws, files=[], timeline=timeline), dims=DIMS)
    assert trace.ok
    assert (trace.mode, trace.turns, trace.files_read) == ("output", 1, [])
    first = srv.requests[0]
    assert phase(first) == "output" and "tools" not in first and "tool_choice" not in first
    assert timeline in first["messages"][1]["content"]
    assert all(phase(r) != "explore" for r in srv.requests)


async def test_turn_limit_wrap_up_then_final_turn_without_tools(srv: FakeLLM, client: LLMClient, ws: Path) -> None:
    def answer(req: RecordedRequest) -> Reply:
        if phase(req) == "explore":
            return text("final analysis") if req.get("tool_choice") == "none" else tool_call("list_dir", {})
        return submit({"correctness": 3, "tests": 3})
    srv.responder = answer

    trace = await run_reviewer(client, model(srv), index=0, ctx=context(ws), dims=DIMS, max_turns=7)

    assert trace.ok and trace.turns == 7 and trace.analysis == "final analysis"
    explore = [r for r in srv.requests if phase(r) == "explore"]
    assert len(explore) == 7
    assert [r["tool_choice"] for r in explore] == ["auto"] * 6 + ["none"]
    assert "5 turns left" in explore[2]["messages"][-1]["content"]
    assert "No more tool calls" in explore[6]["messages"][-1]["content"]


async def test_sandbox_refuses_escapes_and_outside_content_never_reaches_the_model(
        srv: FakeLLM, client: LLMClient, ws: Path, tmp_path: Path) -> None:
    marker = "TOP-SECRET-7f3a9c"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{marker}\n")
    os.symlink(outside / "secret.txt", ws / "leak.txt")
    os.symlink(outside, ws / "outdir")
    attempts = [("read_file", {"path": "../../etc/passwd"}), ("read_file", {"path": "/etc/passwd"}),
                ("read_file", {"path": "leak.txt"}), ("read_file", {"path": "outdir/secret.txt"}),
                ("list_dir", {"path": "outdir"}), ("grep", {"pattern": "TOP-SECRET"}),
                ("glob", {"pattern": "**/*.txt"})]
    explore = explorer([tool_calls(attempts)])
    srv.responder = lambda req: explore(req) if phase(req) == "explore" else submit({"correctness": 3, "tests": 3})

    trace = await run_reviewer(client, model(srv), index=0, ctx=context(ws), dims=DIMS)

    assert trace.ok, trace.error
    assert trace.files_read == []
    results = [m for m in trace.messages if m["role"] == "tool"]
    assert [m["isError"] for m in results[:5]] == [True] * 5
    assert "refused" in results[0]["content"] and "refused" in results[2]["content"]
    for body in bodies(srv):
        assert marker not in body
        assert "root:x:0:0" not in body
    assert marker not in json.dumps(trace.to_json())


async def test_secrets_are_redacted_from_requests_and_trace(srv: FakeLLM, client: LLMClient, ws: Path) -> None:
    (ws / "config.env").write_text(f"API_KEY={KEY}\n")
    explore = explorer([tool_call("read_file", {"path": "config.env"})])
    srv.responder = lambda req: explore(req) if phase(req) == "explore" else submit({"correctness": 3, "tests": 3})
    trace = await run_reviewer(client, model(srv), index=0, ctx=context(ws, timeline=f"used key {KEY}"), dims=DIMS)
    assert trace.ok
    assert trace.files_read == ["config.env"]
    assert all(KEY not in b for b in bodies(srv))
    assert KEY not in json.dumps(trace.to_json())
    assert "API_KEY=***" in next(m for m in trace.messages if m["role"] == "tool")["content"]


async def test_reviewer_time_limit(srv: FakeLLM, client: LLMClient, ws: Path) -> None:
    srv.responder = lambda req: delay(5, text(ANALYSIS))
    trace = await run_reviewer(client, model(srv), index=1, ctx=context(ws), dims=DIMS, time_limit=0.5)
    assert not trace.ok and trace.error is not None and trace.error.startswith("timed out after 0.5 s")
    assert trace.error_kind == "time_limit"  # no answer at all: the server may be down
    assert trace.messages  # what was sent so far is kept


async def test_reviewer_never_raises(srv: FakeLLM, client: LLMClient, ws: Path) -> None:
    trace = await run_reviewer(client, model(srv), index=0, ctx=context(ws), dims=[])
    assert not trace.ok and trace.error is not None and "no dimensions" in trace.error
    srv.responder = lambda req: error(400)
    trace = await run_reviewer(client, model(srv), index=0, ctx=context(ws), dims=DIMS)
    assert not trace.ok and trace.error is not None and trace.error.startswith("bad_request:")


# ------------------------------------------------------------------------------------------------ the panel


async def test_panel_consensus_2_4_5_end_to_end(srv: FakeLLM, client: LLMClient, ws: Path) -> None:
    srv.responder = simple_responder({"fake-a": {"correctness": 2, "tests": 4},
                                      "fake-b": {"correctness": 4, "tests": 4},
                                      "fake-c": {"correctness": 5, "tests": 4}})
    result = await run_panel(client, panel_models(srv), context(ws, files=[]), DIMS, 4.2)

    assert result.error is None and not result.rerun and not result.single_reviewer
    by = {s.dimension: s for s in result.scores}
    assert by["correctness"].score == 4.5 > 4  # median 4, the 2 dropped, median of [4, 5]; no rounding
    assert [v["kept"] for v in by["correctness"].reviewer_scores] == [False, True, True]
    assert by["correctness"].reasoning == "correctness is 4"
    assert result.global_score == pytest.approx(0.6 * 4.5 + 0.4 * 4)
    assert result.passed and result.feedback == ""
    assert [r.index for r in result.reviewers] == [0, 1, 2] and all(r.ok for r in result.reviewers)
    assert result.message.startswith("Score 4.30/5 (threshold 4.2)")
    assert "correctness: 4.5/5 (weight: 0.6; votes: 2 (outlier), 4, 5)" in result.details
    assert json.loads(json.dumps(result.to_json()))["scores"][0]["score"] == 4.5


async def test_panel_failure_feedback_names_low_dimensions_with_reasons(
        srv: FakeLLM, client: LLMClient, ws: Path) -> None:
    srv.responder = simple_responder({"correctness": 4, "tests": 2})
    result = await run_panel(client, panel_models(srv), context(ws, files=[]), DIMS, 3.5)
    assert not result.passed and result.global_score == pytest.approx(3.2)
    fb = result.feedback
    assert "3.20/5" in fb and "needs 3.5" in fb
    assert "- tests: 2/5 (weight 0.4)" in fb and "Why: tests is 2" in fb
    assert "correctness:" not in fb  # 4 is not below the threshold
    assert "Evidence: src/calc.py:5 — div by zero unhandled" in fb
    assert "add a div test" in fb and fb.count("add a div test") == 1  # suggestions de-duplicated
    assert "Reviewer summary: Works, thin tests." in fb


async def test_a_reviewer_whose_server_always_fails_does_not_abort_the_panel(
        srv: FakeLLM, client: LLMClient, ws: Path) -> None:
    ok = simple_responder({"correctness": 4, "tests": 4})
    srv.responder = lambda req: error(500) if req["model"] == "fake-a" else ok(req)
    result = await run_panel(client, panel_models(srv), context(ws), DIMS, 3.0)

    assert result.passed and result.error is None and not result.rerun and not result.single_reviewer
    bad = result.reviewers[0]
    assert not bad.ok and bad.error is not None and bad.error.startswith("server:")
    assert [r.ok for r in result.reviewers] == [False, True, True]
    assert [v["reviewer"] for v in result.scores[0].reviewer_scores] == [1, 2]


async def test_single_successful_reviewer_is_used_and_flagged(srv: FakeLLM, client: LLMClient, ws: Path) -> None:
    ok = simple_responder({"correctness": 3, "tests": 5})
    srv.responder = lambda req: ok(req) if req["model"] == "fake-c" else error(500)
    result = await run_panel(client, panel_models(srv), context(ws, files=[]), DIMS, 3.0)
    assert result.single_reviewer and not result.rerun and result.passed
    assert [s.score for s in result.scores] == [3, 5]
    assert "a single reviewer" in result.message


async def test_a_crashing_reviewer_does_not_abort_the_panel(
        srv: FakeLLM, client: LLMClient, ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def flaky(*args: Any, **kwargs: Any) -> ReviewerTrace:
        if kwargs["index"] == 1:
            raise RuntimeError("bug in reviewer")
        return await run_reviewer(*args, **kwargs)
    monkeypatch.setattr("polpo.review.panel.run_reviewer", flaky)
    srv.responder = simple_responder({"correctness": 4, "tests": 4})
    result = await run_panel(client, panel_models(srv), context(ws, files=[]), DIMS, 3.0)
    assert result.passed
    assert not result.reviewers[1].ok and "bug in reviewer" in (result.reviewers[1].error or "")


async def test_zero_successes_rerun_once_then_fail_with_every_error(
        srv: FakeLLM, client: LLMClient, ws: Path) -> None:
    srv.responder = lambda req: error(500)
    result = await run_panel(client, panel_models(srv), context(ws), DIMS, 3.0)

    assert result.rerun and not result.passed and result.global_score is None
    assert [r.index for r in result.reviewers] == [0, 1, 2, 3, 4, 5]
    assert not any(r.ok for r in result.reviewers)
    assert len(srv.requests) == 6
    assert result.error is not None
    for i in range(6):
        assert f"reviewer {i} (openai/fake-" in result.error
    assert "server:" in result.error
    assert result.feedback == "" and result.scores == []
    assert "no reviewer produced valid scores" in result.message


async def test_zero_successes_then_rerun_succeeds(srv: FakeLLM, client: LLMClient, ws: Path) -> None:
    lock = threading.Lock()
    seen = [0]
    ok = simple_responder({"correctness": 4, "tests": 3})

    def answer(req: RecordedRequest) -> Reply:
        with lock:
            seen[0] += 1
            n = seen[0]
        return error(503) if n <= 3 else ok(req)
    srv.responder = answer
    result = await run_panel(client, panel_models(srv), context(ws, files=[]), DIMS, 3.0)
    assert result.rerun and result.passed and result.error is None
    assert [r.ok for r in result.reviewers] == [False] * 3 + [True] * 3
    # votes are by seat (0, 1, 2); the runs that cast them are the re-run's 3, 4, 5
    assert [v["reviewer"] for v in result.scores[0].reviewer_scores] == [0, 1, 2]
    assert result.scores[0].from_reviewer in (3, 4, 5)


async def test_panel_explores_files_concurrently(srv: FakeLLM, client: LLMClient, ws: Path) -> None:
    explore = explorer([tool_call("read_file", {"path": "src/calc.py"}),
                        tool_call("read_file", {"path": "tests/test_calc.py"})])
    scores = {"fake-a": 4, "fake-b": 3, "fake-c": 4}
    srv.responder = lambda req: (explore(req) if phase(req) == "explore"
                                 else submit(dict.fromkeys(("correctness", "tests"), scores[req["model"]])))
    result = await run_panel(client, panel_models(srv), context(ws), DIMS, 3.0)
    assert result.passed and [s.score for s in result.scores] == [4, 4]
    assert all(r.files_read == ["src/calc.py", "tests/test_calc.py"] for r in result.reviewers)
    assert result.tokens == sum(r.tokens for r in result.reviewers) > 0


# ------------------------------------------------------------------------------------------------ dimensions


@pytest.mark.parametrize("bare_array", [False, True])
async def test_generate_dimensions_valid(srv: FakeLLM, client: LLMClient, bare_array: bool) -> None:
    items = [{"name": "API Design", "weight": 4, "description": "REST conventions",
              "rubric": {"1": "not REST", "5": "textbook"}},
             {"name": "error_handling", "weight": 3, "description": "status codes"},
             {"name": "docs", "weight": 3, "description": "documented"}]
    dims: object = items if bare_array else {"dimensions": items}
    srv.script(text("```json\n" + json.dumps(dims) + "\n```"))
    got = await generate_dimensions(client, model(srv), title="Users API", description="CRUD /users",
                                    criteria="RESTful")
    assert got is not None
    assert [(d.name, d.weight) for d in got] == [("api_design", 0.4), ("error_handling", 0.3), ("docs", 0.3)]
    assert dict(got[0].levels) == {"1": "not REST", "5": "textbook"}
    (req,) = srv.requests
    assert phase(req) == "dimensions" and "Users API" in req["messages"][1]["content"]
    exp = LlmReviewExpectation(type="llm_review", criteria="RESTful")
    assert choose(exp.dimensions, got) == (got, "generated")


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (text(json.dumps({"dimensions": [{"name": "a", "weight": 1, "description": "x"}]})), "invalid dimensions"),
        (text(json.dumps({"dimensions": [{"name": n, "weight": 0, "description": "x"} for n in "abc"]})),
         "invalid dimensions"),
        (text("I think correctness matters."), "invalid dimensions"),
        (error(500), "server"),
    ],
)
async def test_generate_dimensions_invalid_falls_back(srv: FakeLLM, client: LLMClient, reply: Reply,
                                                      why: str) -> None:
    srv.script(reply)
    gen = await generate_dimensions_traced(client, model(srv), title="T", description="D", criteria="C")
    assert gen.dims is None and gen.error is not None and why in gen.error
    json.dumps(gen.to_json())
    dims, source = choose(LlmReviewExpectation(type="llm_review", criteria="C").dimensions, gen.dims)
    assert source == "default" and dims == list(DEFAULT_DIMENSIONS)


# ------------------------------------------------------------------------------------------------ judge


EXPECTATIONS: list[dict[str, Any]] = [
    {"type": "test", "command": "npm test -- --grep users"},
    {"type": "llm_review", "criteria": "good", "threshold": 4.5},
    {"type": "file_exists", "paths": ["src/routes/users.ts"]},
]
FAILED: list[dict[str, Any]] = [
    {"index": 0, "type": "test", "message": "exit code 1", "details": "0 passing"},
    {"index": 1, "type": "llm_review", "message": "Score 3.6/5", "globalScore": 3.6},
    {"index": 2, "type": "file_exists", "message": "Missing 1/1 file(s)"},
]


async def test_judge_applies_safe_corrections_in_one_call(srv: FakeLLM, client: LLMClient) -> None:
    srv.script(text(json.dumps({"corrections": [
        {"index": 0, "verdict": "expectation_wrong", "reason": "grep pattern", "fix": {"command": "npm test"}},
        {"index": 1, "verdict": "expectation_wrong", "reason": "too strict", "fix": {"threshold": 2.0}},
        {"index": 2, "verdict": "work_wrong", "reason": "file really missing"},
    ]})))
    before = json.loads(json.dumps(EXPECTATIONS))
    result = await judge_expectations(client, model(srv), title="Users", description="CRUD",
                                      agent_output="done", failed=FAILED, expectations=EXPECTATIONS)
    assert len(srv.requests) == 1 and phase(srv.requests[0]) == "judge"
    assert result.error is None and result.changed
    assert [(c.index, c.field, c.new) for c in result.applied] == [(0, "command", "npm test"), (1, "threshold", 3.5)]
    assert "clamped" in result.applied[1].note
    assert [r.proposal["index"] for r in result.rejected] == [2]
    assert [v["verdict"] for v in result.verdicts] == ["expectation_wrong", "expectation_wrong", "work_wrong"]
    assert result.expectations[0]["command"] == "npm test" and result.expectations[1]["threshold"] == 3.5
    assert before == EXPECTATIONS
    assert "expectation #1" in srv.requests[0]["messages"][1]["content"]
    json.dumps(result.to_json())


async def test_judge_accepts_a_bare_array(srv: FakeLLM, client: LLMClient) -> None:
    srv.script(text(json.dumps([{"index": 2, "verdict": "expectation_wrong", "reason": "moved",
                                 "fix": {"paths": ["src/api/users.ts"]}}])))
    result = await judge_expectations(client, model(srv), title="Users", description="CRUD",
                                      agent_output="done", failed=FAILED, expectations=EXPECTATIONS,
                                      files_changed=["src/api/users.ts"])
    assert [(c.index, c.new) for c in result.applied] == [(2, ["src/api/users.ts"])]
    assert "- src/api/users.ts" in srv.requests[0]["messages"][1]["content"]


@pytest.mark.parametrize("reply", [text("I am not sure."), error(500), text('{"corrections": "none"}'), text("{}")])
async def test_judge_failures_change_nothing_and_never_raise(srv: FakeLLM, client: LLMClient, reply: Reply) -> None:
    srv.script(reply)
    result = await judge_expectations(client, model(srv), title="Users", description="CRUD",
                                      agent_output="done", failed=FAILED, expectations=EXPECTATIONS)
    assert not result.changed and result.expectations == EXPECTATIONS


async def test_judge_without_failures_makes_no_call(srv: FakeLLM, client: LLMClient) -> None:
    result = await judge_expectations(client, model(srv), title="T", description="D", agent_output="",
                                      failed=[], expectations=EXPECTATIONS)
    assert srv.requests == [] and not result.changed


# ------------------------------------------------------------------------------------------------ payload (pure)


def test_validate_submission_leniency_and_strictness() -> None:
    s = validate_submission({"scores": {"Correctness": {"score": "4", "reason": "fine"}, "tests": 2,
                                        "style": 5}, "summary": None,
                             "suggestions": ["x", 3, ""]}, DIMS)
    assert [(d.dimension, d.score, d.reasoning) for d in s.scores] == [("correctness", 4, "fine"), ("tests", 2, "")]
    assert s.ignored == ["style"] and s.summary == "" and s.suggestions == ["x"]
    s = validate_submission(json.dumps({"scores": [
        {"dimension": "correctness", "score": 3, "evidence": ["see calc.py", {"file": "a.py", "line": "12"},
                                                              {"file": None, "line": True}]},
        {"dimension": "tests", "score": 3}]}), DIMS)
    assert s.scores[0].evidence == [{"file": "", "line": None, "note": "see calc.py"},
                                    {"file": "a.py", "line": 12, "note": ""},
                                    {"file": "", "line": None, "note": ""}]
    for bad, why in [
        ({"scores": [{"dimension": "correctness", "score": 4}]}, "missing score for tests"),
        ({"scores": [{"dimension": "correctness", "score": 4}, {"dimension": "tests", "score": 4},
                     {"dimension": "tests", "score": 2}]}, "more than once: tests"),
        ({"scores": [{"dimension": "correctness", "score": True}, {"dimension": "tests", "score": 4}]}, "boolean"),
        ({"scores": [{"dimension": "correctness", "score": "high"}, {"dimension": "tests", "score": 4}]},
         "must be a number"),
        ({"scores": [{"dimension": "correctness", "score": float("nan")}, {"dimension": "tests", "score": 4}]},
         "outside 1..5"),
        ({"scores": []}, "scores"),
        ([1, 2], "not a JSON object"),
        ("nope", "not a JSON object"),
    ]:
        with pytest.raises(ValueError, match=why):
            validate_submission(bad, DIMS)


def test_a_summary_written_as_the_last_score_item_is_read_as_the_summary() -> None:
    """Qwen2.5-Coder-1.5B closed its ``scores`` list with ``{"summary": …, "suggestions": […]}`` (dev item
    he031): the whole review was rejected as "scores.4.dimension: Field required". An item that scores nothing
    is not a score; an item that half-scores still is one, and still fails."""
    s = validate_submission({"scores": [{"dimension": "correctness", "score": 2}, {"dimension": "tests", "score": 5},
                                        {"summary": "fails E8", "suggestions": ["handle 1"]}, {}]}, DIMS)
    assert [(d.dimension, d.score) for d in s.scores] == [("correctness", 2), ("tests", 5)]
    assert s.summary == "fails E8" and s.suggestions == ["handle 1"] and s.ignored == []
    s = validate_submission({"scores": [{"dimension": "correctness", "score": 2}, {"dimension": "tests", "score": 5},
                                        {"summary": "inner"}], "summary": "outer"}, DIMS)
    assert s.summary == "outer"
    for half in ({"score": 3}, {"dimension": "tests"}):
        with pytest.raises(ValueError, match=r"scores\.2"):
            validate_submission({"scores": [{"dimension": "correctness", "score": 2},
                                            {"dimension": "tests", "score": 5}, half]}, DIMS)
