"""A panel of one temperature-0 model is more than copies of one reviewer: seats 1 and 2 sample with seeds of
their own, judge from their own angle and see the evidence in another order (the requests FakeLLM receives say
so), and the result says whether its seats were copies."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from polpo.llm.client import LLMClient, ModelSettings, load_litellm
from polpo.review.dimensions import Dim
from polpo.review.evidence import CheckEvidence
from polpo.review.panel import PanelOptions, PanelResult, run_panel
from polpo.review.reviewer import ReviewContext
from polpo.review.seats import FRAMINGS, SEAT_TEMPERATURE
from tests.support.fake_llm import FakeLLM, RecordedRequest
from tests.support.judges import ScriptedJudge, phase

pytestmark = pytest.mark.anyio

CHECKS = (CheckEvidence("test", "pytest -q", False, "exit code 1", "1 failed, 2 passed"),
          CheckEvidence("file_exists", "out.txt", True, "1/1 file(s) exist"))


@pytest.fixture
async def srv() -> AsyncIterator[FakeLLM]:
    await load_litellm()
    with FakeLLM() as server:
        server.responder = ScriptedJudge(score=4.0)
        yield server
        assert server.errors == []


async def panel(srv: FakeLLM, tmp_path: Path, options: PanelOptions | None = None) -> PanelResult:
    ctx = ReviewContext(title="Greet", description="Write hello to out.txt.", criteria="It greets.",
                        workspace=tmp_path, files_changed=[], timeline="agent ran; exit 0", checks=CHECKS)
    judge = ModelSettings("openai/fake-model", api_base=srv.base_url, timeout=60, temperature=0)
    return await run_panel(LLMClient(max_retries=0), [judge] * 3, ctx, [Dim("works", 1.0, "It works")], 3.0,
                           options=options)


def seat_of(req: RecordedRequest) -> tuple[float | None, int | None]:
    return req.get("temperature"), req.get("seed")


async def test_seats_of_one_deterministic_model_sample_differently_and_are_not_copies(
        srv: FakeLLM, tmp_path: Path) -> None:
    result = await panel(srv, tmp_path)

    assert sorted({seat_of(r) for r in srv.requests}, key=str) == sorted(
        {(0, None), (SEAT_TEMPERATURE, 1001), (SEAT_TEMPERATURE, 1002)}, key=str)
    prompts = {seat_of(r): r["messages"][1]["content"] for r in srv.requests if phase(r) == "output"}
    first, one, two = prompts[(0, None)], prompts[(SEAT_TEMPERATURE, 1001)], prompts[(SEAT_TEMPERATURE, 1002)]
    assert "YOUR ANGLE" not in first
    assert f"YOUR ANGLE: {FRAMINGS[1]}" in one and f"YOUR ANGLE: {FRAMINGS[2]}" in two
    assert first.index("E1 [FAILED]") < first.index("E2 [PASSED]")
    assert one.index("E2 [PASSED]") < one.index("E1 [FAILED]")  # the evidence rotated for seat 1
    scoring = {seat_of(r): r["messages"][1]["content"] for r in srv.requests if phase(r) == "json"}
    assert scoring[(SEAT_TEMPERATURE, 1001)].index("E2 [") < scoring[(SEAT_TEMPERATURE, 1001)].index("E1 [")
    assert not result.copies and result.review_json()["copies"] is False
    assert [r.seat["seed"] for r in result.reviewers] == [None, 1001, 1002]
    assert json.loads(json.dumps(result.to_json()))["reviewers"][1]["seat"]["framing"] == FRAMINGS[1]
    assert result.passed and result.global_score == 4.0


async def test_without_diversity_the_seats_are_copies_and_the_result_says_so(srv: FakeLLM, tmp_path: Path) -> None:
    result = await panel(srv, tmp_path, PanelOptions(diversity=False))

    assert {seat_of(r) for r in srv.requests} == {(0, None)}
    assert all("YOUR ANGLE" not in r["messages"][1]["content"] for r in srv.requests)
    assert len({r["messages"][1]["content"] for r in srv.requests if phase(r) == "output"}) == 1  # three copies
    assert result.copies and result.review_json()["copies"] is True


async def test_a_seats_later_samples_do_not_repeat_its_first(srv: FakeLLM, tmp_path: Path) -> None:
    await panel(srv, tmp_path, PanelOptions(samples=2))
    seeds = sorted((s for _, s in {seat_of(r) for r in srv.requests} if s is not None))
    assert seeds == [1001, 1002, 1100, 1101, 1102]  # seat 0's second sample too
