"""G-Eval's probability-weighted scores end to end: the reviewer asks for token log-probabilities, FakeLLM serves
them (OpenAI's ``logprobs.content`` shape, over real HTTP through litellm), and each score becomes the mean of its
digit's distribution; without them the sampled value stands and the trace says which was used; a server that
refuses them is asked again without, once, and never asked for them again."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from polpo.llm.client import LLMClient, ModelSettings, load_litellm
from polpo.review.dimensions import Dim
from polpo.review.panel import PanelOptions, run_panel
from polpo.review.reviewer import ReviewContext, ReviewerTrace, run_reviewer
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, score_logprobs, text
from tests.support.judges import phase

pytestmark = pytest.mark.anyio

DIMS = [Dim("correctness", 0.6, "It works"), Dim("tests", 0.4, "It is tested")]
ANALYSIS = "correctness: right (calc.py:2). tests: thin (test_calc.py:4)."
ANSWER = json.dumps({"scores": [{"dimension": "correctness", "reasoning": "add is right (calc.py:2)", "score": 4},
                                {"dimension": "tests", "reasoning": "one test only (test_calc.py:4)", "score": 2}],
                     "summary": "right, thinly tested"})
DISTS: list[Mapping[int, float]] = [{4: 0.6, 3: 0.3, 5: 0.1}, {2: 0.5, 3: 0.5}]




def settings(judge_llm: FakeLLM) -> ModelSettings:
    return ModelSettings("openai/fake-model", api_base=judge_llm.base_url, timeout=60, temperature=0)


def context(ws: Path) -> ReviewContext:
    return ReviewContext(title="Calculator", description="Write add() with a test.", criteria="add works.",
                         workspace=ws, files_changed=[], timeline="agent ran; exit 0")


def judge(logprobs: bool) -> Any:
    def answer(req: RecordedRequest) -> Reply:
        if phase(req) == "output":
            return text(ANALYSIS)
        return text(ANSWER, logprobs=score_logprobs(ANSWER, DISTS) if logprobs else None)
    return answer


async def test_each_score_is_the_probability_weighted_mean_of_its_digit(judge_llm: FakeLLM, tmp_path: Path) -> None:
    judge_llm.responder = judge(logprobs=True)

    trace = await run_reviewer(LLMClient(max_retries=0), settings(judge_llm), index=0, ctx=context(tmp_path), dims=DIMS)

    assert trace.ok and trace.strategy == "json_text" and trace.score_source == "probability"
    correctness, tests = trace.scores
    assert correctness.score == pytest.approx(0.6 * 4 + 0.3 * 3 + 0.1 * 5) and correctness.sampled == 4
    assert tests.score == pytest.approx(2.5) and tests.sampled == 2
    assert correctness.dist == {"probs": {"3": 0.3, "4": 0.6, "5": 0.1}, "mass": 1.0}
    assert trace.global_score == pytest.approx(0.6 * 3.8 + 0.4 * 2.5)
    scoring = judge_llm.requests[-1]
    assert phase(scoring) == "json" and scoring["logprobs"] is True and scoring["top_logprobs"] == 10
    assert "logprobs" not in judge_llm.requests[0]  # the analysis has no score to weigh
    data = json.loads(json.dumps(trace.to_json()))
    assert data["scoreSource"] == "probability" and data["scores"][0]["sampled"] == 4
    assert ReviewerTrace.from_json(data).scores == trace.scores


async def test_the_panel_decides_on_the_weighted_scores_and_says_so(judge_llm: FakeLLM, tmp_path: Path) -> None:
    judge_llm.responder = judge(logprobs=True)

    result = await run_panel(LLMClient(max_retries=0), [settings(judge_llm)], context(tmp_path), DIMS, 3.25)

    assert result.global_score == pytest.approx(0.6 * 3.8 + 0.4 * 2.5) and result.passed  # sampled: 3.2, a fail
    review = result.review_json()
    assert review["scoreSource"] == "probability" and review["reviewers"][0]["scoreSource"] == "probability"


async def test_without_logprobs_the_sampled_scores_stand_and_say_so(judge_llm: FakeLLM, tmp_path: Path) -> None:
    judge_llm.responder = judge(logprobs=False)

    trace = await run_reviewer(LLMClient(max_retries=0), settings(judge_llm), index=0, ctx=context(tmp_path), dims=DIMS)

    assert trace.ok and trace.score_source == "sampled"
    assert [(s.score, s.sampled, s.dist) for s in trace.scores] == [(4, None, None), (2, None, None)]


async def test_the_panel_can_be_told_not_to_ask_for_logprobs(judge_llm: FakeLLM, tmp_path: Path) -> None:
    judge_llm.responder = judge(logprobs=True)

    result = await run_panel(LLMClient(max_retries=0), [settings(judge_llm)], context(tmp_path), DIMS, 3.0,
                             options=PanelOptions(logprobs=False))

    assert all("logprobs" not in r for r in judge_llm.requests)
    assert result.review_json()["scoreSource"] == "sampled" and result.global_score == pytest.approx(3.2)


async def test_a_server_that_refuses_logprobs_is_asked_again_without_and_never_again(tmp_path: Path) -> None:
    await load_litellm()
    with FakeLLM(strict="no-logprobs") as judge_llm:
        judge_llm.responder = judge(logprobs=True)
        client = LLMClient(max_retries=0)
        first = await run_reviewer(client, settings(judge_llm), index=0, ctx=context(tmp_path), dims=DIMS)
        second = await run_reviewer(client, settings(judge_llm), index=1, ctx=context(tmp_path), dims=DIMS)

    assert first.ok and second.ok and first.strategy_errors == [] and first.strategy == "json_text"
    assert first.score_source == second.score_source == "sampled"
    asked = [(phase(r), bool(r.get("logprobs"))) for r in judge_llm.requests]
    assert asked == [("output", False), ("json", True), ("json", False),  # refused, then sent without
                     ("output", False), ("json", False)]  # remembered: not asked again
    assert [status for status, _ in judge_llm.refusals] == [400]
    assert judge_llm.requests[2]["messages"] == judge_llm.requests[1]["messages"]  # the same request, only the ask dropped
