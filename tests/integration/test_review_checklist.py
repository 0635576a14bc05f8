"""An ``llm_review`` with a checklist, a reference and scored examples, run by the check itself through the panel
against FakeLLM over real HTTP: the questions are answered once per reviewer (P(yes) from the answer tokens'
log-probabilities), the dimensions they belong to are derived from them, and only the others are scored 1–5."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from polpo.checks.base import CheckContext, Chosen
from polpo.checks.expectations import LlmReviewExpectation
from polpo.checks.llm_review import LlmReview
from polpo.clock import SystemClock
from polpo.llm.client import ChatClient, LLMClient, ModelSettings
from polpo.review.panel import PanelOptions
from polpo.review.trace import ReviewerTrace
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, answer_logprobs, text
from tests.support.judges import ScriptedJudge, phase

pytestmark = pytest.mark.anyio

SOURCE = "def below_zero(ops):\n    return sum(ops) < 0\n"
"""Misses a dip that recovers: the task's stated example fails when polpo runs it."""
RIGHT = ("def below_zero(ops):\n    balance = 0\n    for op in ops:\n        balance += op\n"
         "        if balance < 0:\n            return True\n    return False\n")
TASK = "Write below_zero(ops) in solution.py.\n>>> below_zero([1, -2, 5])\nTrue\n"


class Backend:
    """The daemon's side of a review, in memory: the judges, the stored yardstick, the kept traces."""

    def __init__(self, llm: ChatClient, judges: Sequence[ModelSettings]) -> None:
        self.llm, self.judges = llm, list(judges)
        self.reviewer_timeout = 120.0
        self.options = PanelOptions()
        self.stored: dict[int, Chosen] = {}
        self.traces: list[ReviewerTrace] = []

    def cached(self, seat: int) -> ChatClient | None:
        return None

    async def dimensions(self, check_idx: int, choose: Callable[[], Awaitable[Chosen]]) -> Chosen:
        if check_idx not in self.stored:
            self.stored[check_idx] = await choose()
        return self.stored[check_idx]

    async def previous_review(self, check_idx: int, attempt: int) -> Mapping[str, Any] | None:
        return None

    def keep_traces(self, check_idx: int, traces: Sequence[ReviewerTrace], *, failed: bool = False) -> None:
        self.traces.extend(traces)




def context(ws: Path, backend: Backend, source: str = SOURCE) -> CheckContext:
    (ws / "solution.py").write_text(source)
    return CheckContext(workspace=ws, clock=SystemClock(), check_timeout=60, task_title="Below zero",
                        task_description=TASK, files_changed=["solution.py"], timeline="agent ran; exit 0",
                        review=backend)


def answers(p_yes: Sequence[float]) -> Reply:
    content = json.dumps({"answers": [{"question": i, "evidence": "E1", "answer": "yes" if p >= 0.5 else "no"}
                                      for i, p in enumerate(p_yes, 1)]})
    return text(content, logprobs=answer_logprobs(content, p_yes))


async def test_a_checklist_alone_is_the_rubric(judge_llm: FakeLLM, tmp_path: Path) -> None:
    def respond(req: RecordedRequest) -> Reply:
        return text("analysis: E1 fails on a dip that recovers (solution.py:2).") if phase(req) == "explore" \
            else answers([0.9, 0.3, 0.02])
    judge_llm.responder = respond
    exp = LlmReviewExpectation.model_validate({"type": "llm_review", "threshold": 3.0, "checklist": [
        "Does every stated example pass?", "Is a dip below zero that recovers caught?",
        {"question": "Is there a test?", "dimension": "tests"}]})
    backend = Backend(LLMClient(max_retries=0), [ModelSettings("openai/fake-model", api_base=judge_llm.base_url,
                                                               timeout=60, temperature=0)])
    backend.options = PanelOptions(probes=False)  # probes have their own tests (test_review_probes.py)

    outcome = await LlmReview().run(exp, context(tmp_path, backend))

    assert outcome.dimension_source == "checklist" and outcome.error is None
    dims, source, _ = backend.stored[0]
    assert source == "checklist" and [(d.name, round(d.weight, 4)) for d in dims] == [("checklist", 0.6667),
                                                                                      ("tests", 0.3333)]
    by = {s["dimension"]: s["score"] for s in outcome.scores or []}
    # the answers alone give 1 + 4 * (0.9 + 0.3) / 2 = 3.4, but the stated example failed when polpo ran it, so
    # the dimensions (none marked critical: all of them) are capped at 2
    assert by == {"checklist": pytest.approx(2.0), "tests": pytest.approx(1.08)}
    assert not outcome.passed and outcome.global_score == pytest.approx(2 / 3 * 2.0 + 1 / 3 * 1.08, abs=1e-3)
    assert [phase(r) for r in judge_llm.requests] == ["explore", "checklist"]  # no 1–5 scoring left to ask for
    asked = judge_llm.requests[1]
    assert asked["logprobs"] is True and "Q3. Is there a test?" in asked["messages"][1]["content"]
    (trace,) = backend.traces
    assert [(a["answer"], a["pYes"], a["fromLogprobs"]) for a in trace.checklist] == [
        ("yes", 0.9, True), ("no", 0.3, True), ("no", 0.02, True)]
    assert trace.scores[0].from_questions and trace.scores[0].cited  # each answer named its evidence


async def test_a_checklist_refines_one_dimension_and_the_rest_are_scored_with_anchors_and_a_reference(
        judge_llm: FakeLLM, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "ref").mkdir(parents=True)
    (ws / "ref" / "reference.py").write_text("def below_zero(ops):\n    # REFERENCE SOLUTION\n    ...\n")
    judge = ScriptedJudge(score=4.0, cite="E1")
    judge_llm.responder = judge
    exp = LlmReviewExpectation.model_validate({
        "type": "llm_review", "threshold": 3.0, "reference": {"file": "ref/reference.py"},
        "examples": [{"output": "def below_zero(ops): return False", "score": 1, "why": "never true"}],
        "dimensions": [{"name": "correctness", "weight": 0.5}, {"name": "Style", "weight": 0.5}],
        "checklist": [{"question": "Does every stated example pass?", "dimension": "correctness"}]})
    backend = Backend(LLMClient(max_retries=0), [ModelSettings("openai/fake-model", api_base=judge_llm.base_url,
                                                               timeout=60, temperature=0)])

    backend.options = PanelOptions(probes=False)  # probes have their own tests (test_review_probes.py)

    outcome = await LlmReview().run(exp, context(ws, backend, RIGHT))

    assert [phase(r) for r in judge_llm.requests] == ["explore", "checklist", "json"]
    scoring = judge_llm.requests[2]["messages"][1]["content"]
    assert "Score each of these dimensions: Style." in scoring  # correctness is the checklist's
    assert "SCORED EXAMPLES (how people scored similar work; score like them):\nExample 1: scored 1 — why: never " \
           "true\n    def below_zero(ops): return False" in scoring
    assert "REFERENCE (given by the task's author" in judge_llm.requests[0]["messages"][1]["content"]
    assert "# REFERENCE SOLUTION" in judge_llm.requests[0]["messages"][1]["content"]
    by = {s["dimension"]: s["score"] for s in outcome.scores or []}
    assert by == {"correctness": 5.0, "Style": 4.0} and outcome.passed  # the yes gave 5, the scorer 4
    assert judge.calls == {"explore": 1, "checklist": 1, "json": 1}
