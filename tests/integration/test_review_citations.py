"""A score must cite its evidence: one that cites none is asked about once, in the same conversation; a score
that still cites none is marked, and its vote weighs half in the consensus (FakeLLM over real HTTP)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from polpo.llm.client import LLMClient, ModelSettings
from polpo.review import score_prompts
from polpo.review.dimensions import Dim
from polpo.review.panel import run_panel
from polpo.review.reviewer import ReviewContext, run_reviewer
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, text
from tests.support.judges import phase

pytestmark = pytest.mark.anyio

DIMS = [Dim("correctness", 1.0, "It is right")]
TASK = "Write below_zero(ops).\n>>> below_zero([1, -2])\nTrue\n"
SOURCE = "def below_zero(ops):\n    return sum(ops) < 0\n"
VAGUE = "the code looks correct and well structured"
CITED = "E1 passed: below_zero([1, -2]) gave True (solution.py:2)"




def context(tmp_path: Path) -> ReviewContext:
    (tmp_path / "solution.py").write_text(SOURCE)
    return ReviewContext(title="Below zero", description=TASK, criteria="It is right.", workspace=tmp_path,
                         files_changed=["solution.py"], timeline="agent ran; exit 0")


def scores(score: int, reasoning: str) -> Reply:
    return text(json.dumps({"scores": [{"dimension": "correctness", "reasoning": reasoning, "score": score}],
                            "summary": "s"}))


def asked_for_evidence(req: RecordedRequest) -> bool:
    return bool(req["messages"][-1]["content"] == score_prompts.ask_evidence(["correctness"]))


def reviewer(first: Reply, again: Reply) -> Callable[[RecordedRequest], Reply]:
    def respond(req: RecordedRequest) -> Reply:
        if phase(req) == "explore":
            return text("correctness: fine.")
        return again if asked_for_evidence(req) else first
    return respond


def settings(judge_llm: FakeLLM, name: str = "a") -> ModelSettings:
    return ModelSettings(f"openai/{name}", api_base=judge_llm.base_url, timeout=60, temperature=0)


async def test_an_uncited_score_is_asked_about_once_and_the_cited_answer_is_used(judge_llm: FakeLLM,
                                                                                 tmp_path: Path) -> None:
    judge_llm.responder = reviewer(scores(5, VAGUE), scores(4, CITED))

    trace = await run_reviewer(LLMClient(max_retries=0), settings(judge_llm), index=0, ctx=context(tmp_path), dims=DIMS)

    assert trace.ok and trace.evidence_asked and trace.uncited == []
    assert [(s.score, s.reasoning, s.cited) for s in trace.scores] == [(4, CITED, True)]
    assert [phase(r) for r in judge_llm.requests] == ["explore", "json", "json"]
    ask = judge_llm.requests[2]["messages"]
    assert ask[:2] == judge_llm.requests[1]["messages"]  # the same conversation: the first answer, then the ask
    assert ask[2]["role"] == "assistant" and VAGUE in ask[2]["content"]
    assert "cite no evidence" in ask[3]["content"] and ask[3]["role"] == "user"
    assert [m.get("strategy") for m in trace.messages if m["phase"] == 2][-2:] == ["evidence", "evidence"]


async def test_a_score_that_still_cites_nothing_is_marked_and_asked_only_once(judge_llm: FakeLLM,
                                                                              tmp_path: Path) -> None:
    judge_llm.responder = reviewer(scores(5, VAGUE), scores(5, "I am sure it is right"))

    result = await run_panel(LLMClient(max_retries=0), [settings(judge_llm)], context(tmp_path), DIMS, 3.0)

    trace = result.reviewers[0]
    assert trace.ok and trace.evidence_asked and trace.uncited == ["correctness"]
    assert trace.scores[0].cited is False and trace.scores[0].to_json()["cited"] is False
    assert sum(asked_for_evidence(r) for r in judge_llm.requests) == 1
    review = result.review_json()
    assert review["uncited"] == ["correctness"] and review["reviewers"][0]["evidenceAsked"] is True
    assert result.scores[0].reviewer_scores[0]["uncited"] is True
    assert result.passed and result.global_score == 5  # alone, it is still the verdict


async def test_an_answer_to_the_ask_that_does_not_parse_leaves_the_first_standing(judge_llm: FakeLLM,
                                                                                  tmp_path: Path) -> None:
    judge_llm.responder = reviewer(scores(5, VAGUE), text("E1, I think."))

    trace = await run_reviewer(LLMClient(max_retries=0), settings(judge_llm), index=0, ctx=context(tmp_path), dims=DIMS)

    assert trace.ok and [s.score for s in trace.scores] == [5] and trace.uncited == ["correctness"]
    assert trace.strategy_errors == ["evidence: no JSON object in the reply"]


async def test_uncited_votes_weigh_half_in_the_panel(judge_llm: FakeLLM, tmp_path: Path) -> None:
    per_model = {"a": reviewer(scores(2, CITED), scores(2, CITED)),
                 "b": reviewer(scores(4, VAGUE), scores(4, VAGUE)),
                 "c": reviewer(scores(4, VAGUE), scores(4, VAGUE))}
    judge_llm.responder = lambda req: per_model[req["model"]](req)

    result = await run_panel(LLMClient(max_retries=0), [settings(judge_llm, m) for m in "abc"], context(tmp_path),
                             DIMS, 3.0)

    (d,) = result.scores
    assert [(v["reviewer"], v["score"], v.get("uncited", False)) for v in d.reviewer_scores] == [
        (0, 2, False), (1, 4, True), (2, 4, True)]
    assert d.score == 3.0 and result.global_score == 3.0  # unweighted, the two uncited 4s would make it 4
    assert result.review_json()["uncited"] == []  # one reviewer did cite its evidence
