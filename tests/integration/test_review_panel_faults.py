"""The review panel under faults, against FakeLLM over real HTTP with a real workspace on disk.

Each reviewer has its own model name (``openai/fake-a``, ``fake-b``, ``fake-c``), so a responder can make one
reviewer misbehave — rate-limited, garbage, out-of-scale scores, too slow, an outlier — while the others work,
and check that it fails (or is outvoted) alone. Replies are chosen by request shape (phase) and model, never by
arrival order: the three reviewers run concurrently.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from polpo.llm.client import LLMClient, ModelSettings
from polpo.review import score_prompts
from polpo.review.dimensions import Dim
from polpo.review.panel import PanelResult, ReviewContext, run_panel
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, delay, error, text, tool_call
from tests.support.judges import phase

pytestmark = pytest.mark.anyio

KEY_ENV = "POLPO_REVIEW_FAULTS_KEY"
KEY = "sk-review-faults-0123456789abcdef"
MODELS = ("fake-a", "fake-b", "fake-c")
DIMS = [Dim("correctness", 0.6, "It works"), Dim("tests", 0.4, "It is tested")]
ANALYSIS = "correctness: add() is right (src/calc.py:2). tests: one test of add (tests/test_calc.py:4)."

Responder = Callable[[RecordedRequest], Reply]


# ------------------------------------------------------------------------------------------------ set-up


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv(KEY_ENV, KEY)
    with FakeLLM(models=MODELS) as server:
        yield server
        assert server.errors == []
        assert server.unscripted == 0


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "src" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_calc.py").write_text("from src.calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n")
    return root


def panel_models(srv: FakeLLM) -> list[ModelSettings]:
    return [ModelSettings(f"openai/{m}", api_base=srv.base_url, api_key_env=KEY_ENV, timeout=20) for m in MODELS]


def context(ws: Path) -> ReviewContext:
    return ReviewContext(title="Calculator", description="Write add() with a test.",
                         criteria="add works and is tested.", workspace=ws,
                         files_changed=["src/calc.py", "tests/test_calc.py"], timeline="agent ran; exit 0")


def payload(score: Any) -> dict[str, Any]:
    return {"scores": [{"dimension": d.name, "score": score, "reasoning": f"{d.name} is {score}",
                        "evidence": [{"file": "src/calc.py", "line": 2, "note": "add"}]} for d in DIMS],
            "summary": f"scored {score}"}


def submit(score: Any) -> Reply:
    return tool_call(score_prompts.SUBMIT_REVIEW, payload(score))


def reviewer(score: float, *, explore: Responder | None = None) -> Responder:
    """A well-behaved reviewer: reads src/calc.py, writes its analysis, scores every dimension ``score``."""
    def answer(req: RecordedRequest) -> Reply:
        p = phase(req)
        if p == "explore":
            if explore is not None:
                return explore(req)
            seen = sum(1 for m in req["messages"] if m["role"] == "tool")
            return tool_call("read_file", {"path": "src/calc.py"}) if seen == 0 else text(ANALYSIS)
        if p in ("forced", "auto"):
            return submit(score)
        if p == "json":
            return text(json.dumps(payload(score)))
        raise AssertionError(f"unexpected {p} request")
    return answer


def scorer(json_text: Reply, forced: Reply, auto: Reply) -> Responder:
    """A reviewer that explores normally, then answers each scoring strategy (in the order they are tried) as
    given."""
    ok = reviewer(4)

    def answer(req: RecordedRequest) -> Reply:
        return {"json": json_text, "forced": forced, "auto": auto}.get(phase(req)) or ok(req)
    return answer


GARBAGE = scorer(
    json_text=text('Sure: {"scores": [oops, 4]} hope that helps'),
    forced=tool_call(score_prompts.SUBMIT_REVIEW, '{"scores": [{"dimension": "correctness", "score": 4,'),  # cut JSON
    auto=text("LGTM!!! 10/10 would merge again"),
)
SEVENS = scorer(json_text=text(json.dumps(payload(7))), forced=submit(7), auto=submit(7))


def panel(per_model: Mapping[str, Responder]) -> Responder:
    return lambda req: per_model[req["model"]](req)


def of(srv: FakeLLM, name: str) -> list[RecordedRequest]:
    return [r for r in srv.requests if r["model"] == name]


def votes(result: PanelResult) -> list[list[tuple[int, float, bool]]]:
    return [[(v["reviewer"], v["score"], v["kept"]) for v in s.reviewer_scores] for s in result.scores]


# ------------------------------------------------------------------------------------------------ faults


async def test_a_rate_limited_request_is_retried_and_the_panel_passes_with_three(srv: FakeLLM, ws: Path) -> None:
    client = LLMClient(max_retries=2, backoff=0.01)
    lock = threading.Lock()
    limited: list[RecordedRequest] = []
    good = panel({"fake-a": reviewer(4), "fake-b": reviewer(4), "fake-c": reviewer(5)})

    def answer(req: RecordedRequest) -> Reply:
        with lock:
            if req["model"] == "fake-a" and not limited:
                limited.append(req)
                return error(429)
        return good(req)
    srv.responder = answer

    result = await run_panel(client, panel_models(srv), context(ws), DIMS, 3.5)

    assert result.error is None and not result.rerun and not result.single_reviewer
    assert [r.ok for r in result.reviewers] == [True, True, True]
    assert result.passed and result.global_score == pytest.approx(4.0)
    assert votes(result) == [[(0, 4, True), (1, 4, True), (2, 5, True)]] * 2
    a = of(srv, "fake-a")
    assert [phase(r) for r in a] == ["explore", "explore", "explore", "json"]
    assert a[0] is limited[0] and a[1].body == a[0].body  # the same request, sent again after the 429
    assert len(srv.requests) == 3 * 3 + 1
    assert client.calls == len(srv.requests)  # the retry is LLMClient's own (litellm's are off)
    assert result.reviewers[0].files_read == ["src/calc.py"]


async def test_garbage_in_every_scoring_strategy_fails_that_reviewer_alone(srv: FakeLLM, ws: Path) -> None:
    srv.responder = panel({"fake-a": GARBAGE, "fake-b": reviewer(4), "fake-c": reviewer(5)})

    result = await run_panel(LLMClient(max_retries=0), panel_models(srv), context(ws), DIMS, 4.0)

    assert result.error is None and not result.rerun and not result.single_reviewer
    bad, b, c = result.reviewers
    assert (bad.ok, b.ok, c.ok) == (False, True, True)
    assert bad.scores == [] and bad.strategy is None and bad.analysis == ANALYSIS
    plain, forced, auto = bad.strategy_errors
    assert plain == "json_text: no JSON object in the reply"
    assert forced == "forced_tool: no JSON object in submit_review arguments"
    assert auto == "auto_tool: no JSON object in the reply"
    assert bad.error is not None and bad.error.startswith("no valid scores: json_text:")
    assert [phase(r) for r in of(srv, "fake-a")] == ["explore", "explore", "json", "forced", "auto"]
    # the cut arguments are sent back as strict JSON (a strict server refuses them otherwise), answered
    replayed = of(srv, "fake-a")[-1]["messages"][-2]
    assert replayed["tool_calls"][0]["function"]["arguments"] == "{}"
    assert votes(result) == [[(1, 4, True), (2, 5, True)]] * 2  # the other two decide
    assert result.passed and result.global_score == pytest.approx(4.5)
    json.dumps(result.to_json())


@pytest.mark.parametrize("everywhere", [False, True], ids=["first-only", "every-strategy"])
async def test_a_score_of_7_is_rejected_never_clamped(srv: FakeLLM, ws: Path, everywhere: bool) -> None:
    odd = SEVENS if everywhere else scorer(json_text=text(json.dumps(payload(7))), forced=submit(3),
                                           auto=text("unused"))
    srv.responder = panel({"fake-a": odd, "fake-b": reviewer(4), "fake-c": reviewer(4)})

    result = await run_panel(LLMClient(max_retries=0), panel_models(srv), context(ws), DIMS, 3.0)

    a = result.reviewers[0]
    assert all("score 7 is outside 1..5" in e for e in a.strategy_errors)
    assert a.strategy_errors[0].startswith("json_text: scores.0.score (correctness)")
    assert all(r.ok for r in result.reviewers[1:]) and result.passed and not result.rerun
    if everywhere:
        assert not a.ok and a.scores == [] and len(a.strategy_errors) == 3
        assert [e.split(":")[0] for e in a.strategy_errors] == ["json_text", "forced_tool", "auto_tool"]
        assert a.error is not None and "score 7 is outside 1..5" in a.error
        assert votes(result) == [[(1, 4, True), (2, 4, True)]] * 2  # no 5 (a clamped 7) anywhere
    else:
        assert a.ok and a.strategy == "forced_tool" and len(a.strategy_errors) == 1
        assert [s.score for s in a.scores] == [3, 3]
        assert votes(result) == [[(0, 3, True), (1, 4, True), (2, 4, True)]] * 2
        forced = next(r for r in of(srv, "fake-a") if phase(r) == "forced")
        assert forced["messages"][-1]["role"] == "user" and "outside 1..5" in forced["messages"][-1]["content"]
    # the rejected answers stay in the trace
    rejected = [m for m in a.messages if m["phase"] == 2 and m["role"] == "assistant"]
    assert '"score": 7' in rejected[0]["content"]


async def test_a_reviewer_that_times_out_fails_alone(srv: FakeLLM, ws: Path) -> None:
    client = LLMClient(max_retries=0)
    slow = reviewer(4, explore=lambda req: delay(30, text(ANALYSIS)))  # held until the server closes
    srv.script(text("warm-up"))
    await client.chat(panel_models(srv)[1], [{"role": "user", "content": "hi"}])  # litellm imported, not timed
    srv.reset()
    srv.responder = panel({"fake-a": slow, "fake-b": reviewer(4), "fake-c": reviewer(5)})

    result = await run_panel(client, panel_models(srv), context(ws), DIMS, 4.0, reviewer_timeout=2)

    a, b, c = result.reviewers
    assert not a.ok and a.error == "timed out after 2 s"
    assert a.scores == [] and a.messages and a.messages[-1]["role"] == "user"  # the prompt sent is kept
    assert b.ok and c.ok
    assert not result.rerun and result.error is None
    assert votes(result) == [[(1, 4, True), (2, 5, True)]] * 2
    assert result.passed and result.global_score == pytest.approx(4.5)
    assert [phase(r) for r in of(srv, "fake-a")] == ["explore"]


async def test_an_outlier_is_dropped_and_reported_as_not_kept(srv: FakeLLM, ws: Path) -> None:
    srv.responder = panel({"fake-a": reviewer(1), "fake-b": reviewer(4), "fake-c": reviewer(4.5)})

    result = await run_panel(LLMClient(max_retries=0), panel_models(srv), context(ws), DIMS, 4.2)

    assert [r.ok for r in result.reviewers] == [True, True, True]  # an outlier is outvoted, not failed
    assert result.reviewers[0].global_score == 1
    assert votes(result) == [[(0, 1, False), (1, 4, True), (2, 4.5, True)]] * 2
    for s in result.scores:
        assert (s.median, s.score) == (4, 4.25)  # median 4; the 1 is 3 away; median of [4, 4.5]
        assert s.from_reviewer == 1 and s.reasoning == f"{s.dimension} is 4"  # tie 0.25/0.25: the lower score
    assert result.passed and result.global_score == pytest.approx(4.25)  # kept, the 1 would make it 4.0 < 4.2
    assert "votes: 1 (outlier), 4, 4.5" in result.details
    data = json.loads(json.dumps(result.to_json()))
    assert [v["kept"] for v in data["scores"][0]["reviewerScores"]] == [False, True, True]


async def test_all_three_failing_reruns_once_then_fails_with_every_error(srv: FakeLLM, ws: Path) -> None:
    client = LLMClient(max_retries=2, backoff=0.01)
    srv.responder = panel({"fake-a": GARBAGE, "fake-b": SEVENS, "fake-c": lambda req: error(400)})

    result = await run_panel(client, panel_models(srv), context(ws), DIMS, 3.0)

    assert result.rerun and not result.passed and result.global_score is None
    assert [(r.index, r.model, r.ok) for r in result.reviewers] == [
        (i, f"openai/{MODELS[i % 3]}", False) for i in range(6)]
    assert result.scores == [] and result.feedback == "" and result.summary == ""
    err = result.error
    assert err is not None and err.startswith("all reviewers failed, twice: ")
    for i in (0, 3):
        assert f"reviewer {i} (openai/fake-a): no valid scores: json_text: no JSON object in the reply" in err
        assert f"reviewer {i + 1} (openai/fake-b): no valid scores: json_text: scores.0.score" in err
        assert f"reviewer {i + 2} (openai/fake-c): bad_request: " in err
    assert err.count("score 7 is outside 1..5") >= 6  # each of b's three strategies, in both rounds
    # per round: a and b explore twice then try three strategies; c's 400 is not retried
    assert [len(of(srv, m)) for m in MODELS] == [10, 10, 2]
    assert client.calls == len(srv.requests) == 22
    assert "no reviewer produced valid scores (6 tried)" in result.message
    assert result.details == err


async def test_a_secret_the_model_quotes_is_masked_in_the_trace_and_feedback(srv: FakeLLM, ws: Path) -> None:
    quote = f"I saw Authorization: Bearer {KEY} and the key {KEY}."

    def answer(req: RecordedRequest) -> Reply:
        p = phase(req)
        if p == "explore":
            return text(f"{ANALYSIS} {quote}")
        body = {"scores": [{"dimension": d.name, "score": 2, "reasoning": f"weak. {quote}",
                            "evidence": [{"file": "src/calc.py", "line": 1, "note": quote}]} for d in DIMS],
                "summary": f"summary: {quote}", "suggestions": [f"rotate {KEY}"]}
        return tool_call(score_prompts.SUBMIT_REVIEW, body)
    srv.responder = answer

    result = await run_panel(LLMClient(max_retries=0), panel_models(srv), context(ws), DIMS, 3.0)

    assert not result.passed and result.global_score == 2 and result.feedback
    for r in result.reviewers:
        assert all(KEY not in json.dumps(m) for m in r.messages)  # what is redacted today
    assert KEY not in json.dumps(result.to_json())
    assert KEY not in result.details
    assert "Bearer ***" in result.reviewers[0].analysis
