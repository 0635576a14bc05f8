"""Cascaded tiers: the pure policy table, validation, and the engine with a judge over real HTTP — an ACCEPT tier
that passes makes no LLM request at all, one that fails escalates to the FINAL tier, a REJECT tier stops early;
events and the assessment name the tier that decided."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polpo.agents.base import AgentRequest
from polpo.assessment.tiers import ACCEPT, FINAL, REJECT, plan, tier_decision
from polpo.mission.loader import load_mission
from polpo.mission.schema import TaskSpec
from tests.support.engine import ScriptAgent, config, engine_on_memory
from tests.support.fake_llm import FakeLLM
from tests.support.judges import ScriptedJudge, phase

pytestmark = pytest.mark.anyio
KEY_ENV = "POLPO_TIERS_TEST_KEY"


@pytest.mark.parametrize(("policy", "results", "decision"), [
    (REJECT, ["passed", "passed"], "next"),
    (REJECT, ["passed", "failed"], "fail"),
    (REJECT, ["error", "passed"], "error"),   # the check that could reject never ran: undecided
    (REJECT, ["error", "failed"], "fail"),    # a real failure decides anyway
    (ACCEPT, ["passed", "passed"], "pass"),
    (ACCEPT, ["passed", "failed"], "next"),   # escalate
    (ACCEPT, ["error"], "next"),              # an error in a non-final tier escalates (agent-judge)
    (ACCEPT, ["skipped"], "next"),
    (FINAL, ["passed"], "pass"),
    (FINAL, ["failed"], "fail"),
    (FINAL, ["skipped"], "fail"),
    (FINAL, ["error"], "error"),
    (FINAL, ["error", "failed"], "fail"),
    # the judge cannot tell (a calibrated rule's band): neither a pass nor a fail, a person decides
    (FINAL, ["undecided"], "person"),
    (FINAL, ["passed", "undecided"], "person"),
    (FINAL, ["undecided", "failed"], "fail"),  # a real failure decides anyway
    (FINAL, ["undecided", "error"], "error"),  # the errored check runs again first: it may fail the work
    (REJECT, ["passed", "undecided"], "person"),  # the cascade cannot go on past what nobody decided
    (ACCEPT, ["undecided"], "next"),  # an accepting tier escalates, as for an error
])
def test_tier_decision_table(policy: str, results: list[Any], decision: str) -> None:
    assert tier_decision(policy, results) == decision


def spec(**fields: Any) -> TaskSpec:
    return TaskSpec.model_validate({"title": "t", "description": "d", **fields})


FE = {"type": "file_exists", "path": "out.txt"}
REVIEW = {"type": "llm_review", "criteria": "out.txt greets the user", "threshold": 3.0}


def test_plain_expectations_are_the_implied_cascade() -> None:
    s = spec(expectations=[REVIEW, FE, {"type": "test", "command": "true"}])
    tiers = plan(None, s.all_expectations)
    assert [(t.name, t.policy, t.indices, t.explicit) for t in tiers] == [
        ("checks", REJECT, (1, 2), False), ("review", FINAL, (0,), False)]
    assert [(t.name, t.policy) for t in plan(None, spec(expectations=[FE]).all_expectations)] == [("checks", FINAL)]
    assert plan(None, []) == []


def test_explicit_tiers_flatten_in_order_and_run_cheapest_first_within_a_tier() -> None:
    s = spec(tiers=[{"name": "structure", "policy": ACCEPT, "expectations": [REVIEW, FE]},
                    {"name": "judge", "policy": FINAL, "expectations": [REVIEW]}])
    assert [e.type for e in s.all_expectations] == ["llm_review", "file_exists", "llm_review"]
    assert [(t.name, t.indices) for t in plan(s.tiers, s.all_expectations)] == [("structure", (1, 0)),
                                                                                ("judge", (2,))]


@pytest.mark.parametrize(("tiers", "why"), [
    ([{"name": "a", "policy": ACCEPT, "expectations": [FE]}], 'the last tier ("a") must have policy FINAL_TIER'),
    ([{"name": "a", "policy": FINAL, "expectations": [FE]}, {"name": "b", "policy": FINAL, "expectations": [FE]}],
     "only the last tier may be FINAL_TIER; a comes before it"),
    ([{"name": "a", "policy": REJECT, "expectations": [FE]}, {"name": "a", "policy": FINAL, "expectations": [FE]}],
     "tier names must be unique; repeated: a"),
    ([{"name": "a", "policy": FINAL, "expectations": []}], "must list at least one entry"),
    ([{"name": "a", "policy": "MAJORITY", "expectations": [FE]}], "REJECT_ON_ANY_FAIL"),
])
def test_validation_refuses_bad_cascades(tiers: list[dict[str, Any]], why: str) -> None:
    doc = {"tasks": [{"title": "t", "description": "d", "tiers": tiers}]}
    loaded = load_mission(json.dumps(doc).encode(), known_agents=None)
    assert loaded.spec is None
    assert any(why in p.message for p in loaded.problems), loaded.problems


def test_expectations_and_tiers_together_are_refused() -> None:
    doc = {"tasks": [{"title": "t", "description": "d", "expectations": [FE],
                      "tiers": [{"name": "a", "policy": FINAL, "expectations": [FE]}]}]}
    loaded = load_mission(json.dumps(doc).encode(), known_agents=None)
    assert loaded.spec is None and any("either expectations or tiers" in p.message for p in loaded.problems)


# ----------------------------------------------------------------------------------------------- the engine


@pytest.fixture
def judge(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv(KEY_ENV, "sk-tiers")
    with FakeLLM() as srv:
        srv.responder = ScriptedJudge(score=4.0)
        yield srv


def judge_cfg(root: Path, srv: FakeLLM) -> Any:
    return config(root, f"""
[judge]
model = "openai/fake-model"
api_base = "{srv.base_url}"
api_key_env = "{KEY_ENV}"
uncertain_band = 0
[llm]
max_retries = 0
""", retries=0, fixes=0)


def writes(content: str) -> ScriptAgent:
    def act(r: AgentRequest) -> int:
        (r.workspace / "out.txt").write_text(content)
        return 0
    return ScriptAgent(act)


CASCADE = [{"name": "build", "policy": REJECT, "expectations": [FE]},
           {"name": "structure", "policy": ACCEPT, "expectations": [
               {"type": "file_content", "path": "out.txt", "expected": "Hello World!"}]},
           {"name": "judge", "policy": FINAL, "expectations": [REVIEW]}]


def mission() -> dict[str, Any]:
    return {"tasks": [{"title": "greet", "description": "greet", "assignTo": "fake", "tiers": CASCADE}]}


async def test_an_accept_tier_that_passes_accepts_without_any_llm_request(tmp_path: Path, judge: FakeLLM) -> None:
    async with engine_on_memory(judge_cfg(tmp_path, judge), agents={"fake": writes("Hello World!\n")}) as run:
        m = await run.accept(mission())
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed"
    assert judge.requests == []  # not one LLM request: no dimensions, no reviewers
    [complete] = run.of("assessment:complete")
    assert (complete.data["tier"], complete.data["tierPolicy"]) == ("structure", ACCEPT)
    assert "decided by tier 'structure' (ACCEPT_ON_ALL_PASS)" in complete.data["message"]
    assert "tier(s) not run: judge" in complete.data["message"]
    assert [e.data["tier"] for e in run.of("assessment:check:complete")] == ["build", "structure"]


async def test_a_failing_accept_tier_escalates_to_the_final_tier_which_decides(tmp_path: Path,
                                                                              judge: FakeLLM) -> None:
    async with engine_on_memory(judge_cfg(tmp_path, judge), agents={"fake": writes("Hi there, world\n")}) as run:
        m = await run.accept(mission())
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed"  # the judge (4.0 ≥ 3.0) accepts what the exact check did not
    assert judge.requests  # the panel ran
    [complete] = run.of("assessment:complete")
    assert (complete.data["tier"], complete.data["tierPolicy"]) == ("judge", FINAL)
    assert complete.data["globalScore"] == 4.0
    checks = run.of("assessment:check:complete")
    assert [(c.data["tier"], c.data["passed"]) for c in checks] == [("build", True), ("structure", False),
                                                                    ("judge", True)]


async def test_a_reject_tier_stops_the_cascade(tmp_path: Path, judge: FakeLLM) -> None:
    async with engine_on_memory(judge_cfg(tmp_path, judge), agents={"fake": ScriptAgent(lambda r: 0)}) as run:
        m = await run.accept(mission())
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "failed"
    assert [phase(r) for r in judge.requests] == ["judge"]  # only the expectation judge; no review ran
    complete = run.of("assessment:complete")[0]
    assert complete.data["tier"] == "build" and complete.data["passed"] is False
    assert "tier(s) not run: structure, judge" in complete.data["message"]
