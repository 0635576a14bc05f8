"""Reviewer error policy (abstain vs fail), samples with a judge whose scores vary, the stability verdict and the
uncertain-band extra round — the panel against FakeLLM over real HTTP, one model name per seat."""

from __future__ import annotations

import json
import statistics
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from polpo.llm.client import LLMClient, ModelSettings
from polpo.review import score_prompts
from polpo.review.calibration import Calibration
from polpo.review.dimensions import Dim
from polpo.review.panel import PanelOptions, PanelResult, ReviewContext, run_panel
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, error, text, tool_call
from tests.support.judges import phase

pytestmark = pytest.mark.anyio

KEY_ENV = "POLPO_PANEL_SPREAD_KEY"
MODELS = ("fake-a", "fake-b", "fake-c")
DIMS = [Dim("quality", 1.0, "It is good")]
CRASH = "crash"


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv(KEY_ENV, "sk-spread")
    with FakeLLM(models=MODELS) as server:
        yield server
        assert server.errors == []


def models(srv: FakeLLM) -> list[ModelSettings]:
    return [ModelSettings(f"openai/{m}", api_base=srv.base_url, api_key_env=KEY_ENV, timeout=20) for m in MODELS]


def ctx(tmp_path: Path) -> ReviewContext:  # nothing changed: one output-review call, then scoring
    return ReviewContext(title="Greet", description="Say hello.", criteria="It greets.", workspace=tmp_path,
                         files_changed=[], timeline="agent printed hello; exit 0")


class Scripted:
    """Each seat's scores in order (one per run, taken when the run scores); ``CRASH`` makes that seat fail."""

    def __init__(self, scores: Mapping[str, Sequence[float | str]]) -> None:
        self.scores = {k: list(v) for k, v in scores.items()}
        self.lock = threading.Lock()

    def __call__(self, req: RecordedRequest) -> Reply:
        model = str(req["model"])
        with self.lock:
            queue = self.scores[model]
            if queue[0] == CRASH:
                return error(503)
            if phase(req) == "output":
                return text("analysis: it prints hello")
            score = queue.pop(0)
        payload = {"scores": [{"dimension": "quality", "score": score, "reasoning": f"{model} says {score}"}],
                   "summary": f"{model}: {score}"}
        return tool_call(score_prompts.SUBMIT_REVIEW, payload) if phase(req) in ("forced", "auto") else text(
            json.dumps(payload))


async def panel(srv: FakeLLM, tmp_path: Path, scores: Mapping[str, Sequence[float | str]], threshold: float = 3.0,
                **opts: object) -> PanelResult:
    srv.responder = Scripted(scores)
    client = LLMClient(max_retries=0)
    return await run_panel(client, models(srv), ctx(tmp_path), DIMS, threshold,
                           options=PanelOptions(**opts))  # type: ignore[arg-type]


def votes(result: PanelResult) -> list[tuple[int, float, bool, bool]]:
    return [(v["reviewer"], v["score"], v["kept"], bool(v.get("crashed")))
            for v in result.scores[0].reviewer_scores]


# ------------------------------------------------------------------------------------------ reviewer_error


async def test_one_crashed_reviewer_abstains_by_default(srv: FakeLLM, tmp_path: Path) -> None:
    r = await panel(srv, tmp_path, {"fake-a": [4], "fake-b": [4], "fake-c": [CRASH]})
    assert votes(r) == [(0, 4.0, True, False), (1, 4.0, True, False)]
    assert r.passed and r.global_score == 4.0 and r.error is None


async def test_with_fail_a_crashed_reviewer_votes_1_and_is_outvoted_by_two(srv: FakeLLM, tmp_path: Path) -> None:
    r = await panel(srv, tmp_path, {"fake-a": [4], "fake-b": [4], "fake-c": [CRASH]}, reviewer_error="fail")
    assert votes(r) == [(0, 4.0, True, False), (1, 4.0, True, False), (2, 1.0, False, True)]
    assert r.scores[0].reviewer_scores[2]["why"] == "3 from the median 4 (more than 1.5)"
    assert r.passed and r.global_score == 4.0


async def test_two_crashes_abstaining_leave_one_vote_failing_make_a_majority(srv: FakeLLM, tmp_path: Path) -> None:
    scores = {"fake-a": [4.0], "fake-b": [CRASH], "fake-c": [CRASH]}
    r = await panel(srv, tmp_path, scores)
    assert r.passed and r.single_reviewer and votes(r) == [(0, 4.0, True, False)]
    r = await panel(srv, tmp_path, scores, reviewer_error="fail")
    assert not r.passed and r.global_score == 1.0
    assert votes(r) == [(0, 4.0, False, False), (1, 1.0, True, True), (2, 1.0, True, True)]
    assert r.feedback  # a verdict: the agent is told why


async def test_three_crashes_are_an_error_under_either_policy_never_a_fail(srv: FakeLLM, tmp_path: Path) -> None:
    for policy in ("abstain", "fail"):
        r = await panel(srv, tmp_path, {m: [CRASH] for m in MODELS}, reviewer_error=policy)
        assert r.global_score is None and r.error is not None and r.retryable
        assert r.rerun and len(r.reviewers) == 6 and r.feedback == ""
        assert {t.error_kind for t in r.reviewers} == {"server"}


# ---------------------------------------------------------------------------------------------- samples


async def test_samples_give_each_seat_a_median_vote_and_the_spread(srv: FakeLLM, tmp_path: Path) -> None:
    r = await panel(srv, tmp_path, {"fake-a": [3, 5], "fake-b": [4, 4], "fake-c": [2, 4]}, threshold=3.5,
                    samples=2)
    assert len(r.reviewers) == 6 and r.samples == 2 and not r.extra_round
    assert {t.index % 3 for t in r.reviewers} == {0, 1, 2}
    (dim,) = r.scores
    # seat votes: median(3, 5) = 4, median(4, 4) = 4, median(2, 4) = 3 → consensus 4
    assert [(v["reviewer"], v["score"]) for v in dim.reviewer_scores] == [(0, 4.0), (1, 4.0), (2, 3.0)]
    assert sorted(dim.reviewer_scores[0]["samples"]) == [3, 5]
    assert r.global_score == 4.0 and r.passed
    runs = [3, 5, 4, 4, 2, 4]
    assert sorted(dim.spread["votes"]) == sorted(runs)
    assert dim.spread["mean"] == pytest.approx(statistics.fmean(runs), abs=1e-6)
    assert dim.spread["median"] == 4.0
    assert dim.spread["std"] == pytest.approx(statistics.pstdev(runs), abs=1e-6)
    # runs scoring 3 and 2 fall below 3.5 while the consensus passes: flaky, 4 of 6 runs pass
    assert r.stability == "flaky" and r.pass_rate == pytest.approx(4 / 6, abs=1e-3)
    assert r.confidence == pytest.approx(1 - statistics.pstdev(runs) / 2, abs=1e-3)
    assert "flaky" in r.message
    stored = r.review_json()
    assert stored["stability"] == "flaky" and stored["samples"] == 2
    assert stored["scores"][0]["spread"]["std"] == dim.spread["std"]


async def test_agreeing_samples_are_stable(srv: FakeLLM, tmp_path: Path) -> None:
    r = await panel(srv, tmp_path, {m: [2, 2] for m in MODELS}, threshold=3.5, samples=2)
    assert r.stability == "stable_fail" and r.confidence == 1.0 and not r.passed
    r = await panel(srv, tmp_path, {m: [5, 4] for m in MODELS}, threshold=3.0, samples=2)
    assert r.stability == "stable_pass" and r.passed


async def test_a_score_within_the_uncertain_band_adds_one_more_round(srv: FakeLLM, tmp_path: Path) -> None:
    scores = {"fake-a": [3, 2], "fake-b": [3, 2], "fake-c": [4, 4]}
    r = await panel(srv, tmp_path, scores, threshold=3.0, uncertain_band=0.25)
    # round 1: [3, 3, 4] → 3.0, within 0.25 of 3.0 → round 2 adds [2, 2, 4]; seats: 2.5, 2.5, 4 → 2.5
    assert r.extra_round and len(r.reviewers) == 6
    assert r.global_score == 2.5 and not r.passed
    r = await panel(srv, tmp_path, {m: [4] for m in MODELS}, threshold=3.0, uncertain_band=0.25)
    assert not r.extra_round and len(r.reviewers) == 3


async def test_calibration_maps_the_scores_and_keeps_the_raw_ones(srv: FakeLLM, tmp_path: Path) -> None:
    cal = Calibration(scale=0.5, bias=1.0)  # raw 4 → 3, raw 2 → 2
    r = await panel(srv, tmp_path, {m: [4] for m in MODELS}, threshold=3.5, calibration=cal)
    assert r.global_score == 3.0 and r.raw_global_score == 4.0 and not r.passed
    assert r.scores[0].raw_score == 4.0 and r.scores[0].score == 3.0
    assert r.stability == "stable_fail"  # each run, calibrated, is below the threshold too
