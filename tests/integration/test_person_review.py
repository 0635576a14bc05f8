"""Work the judge cannot decide waits for a person (``awaiting_review``): the engine on the memory store, a one-seat
judge over real HTTP (FakeLLM) scoring 3, and a calibrated rule (``passAt`` 4, ``failBelow`` 2) that sends 3 to a
person. While it waits nothing runs — no fix, no retry, no reviewer — and a crash leaves it waiting; the person's
pass makes it done (the panel's score, or theirs), their fail goes on as a failed assessment (a fix told their
reason), and their verdict is stored as a label (an override row).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polpo.agents.base import AgentRequest
from polpo.clock import FakeClock
from polpo.command_args import encode
from polpo.config import Config
from polpo.store.memory import MemoryStore
from tests.support.engine import EngineRun, ScriptAgent, config, engine_on_memory
from tests.support.fake_llm import FakeLLM
from tests.support.judges import ScriptedJudge, rule_calibration
from tests.support.memory_cluster import memory_cluster

pytestmark = pytest.mark.anyio

KEY_ENV = "POLPO_PERSON_REVIEW_KEY"
REVIEW = {"type": "llm_review", "criteria": "out.txt greets the user", "threshold": 3.0,
          "dimensions": [{"name": "works", "weight": 1.0, "description": "Does it greet?"}]}
FIRST_REVIEW = 60  # seconds: a process's first review imports litellm (seconds on a busy machine)
MISSION = {"tasks": [{"title": "greet", "description": "write out.txt", "assignTo": "fake",
                      "expectations": [REVIEW]}]}


@pytest.fixture
def judge(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv(KEY_ENV, "sk-person-review")
    with FakeLLM() as srv:
        srv.responder = ScriptedJudge(score=3.0)
        yield srv


def judged(root: Path, srv: FakeLLM) -> Config:
    cal = rule_calibration(root)  # passAt 4, failBelow 2: the judge's 3 goes to a person
    return config(root, f"""
[judge]
model = "openai/fake-model"
api_base = "{srv.base_url}"
api_key_env = "{KEY_ENV}"
seats = 1
uncertain_band = 0
correct_expectations = false
calibration = "{cal}"
""", retries=1, fixes=1)


def writer() -> ScriptAgent:
    def act(r: AgentRequest) -> int:
        (r.workspace / "out.txt").write_text("hello\n")
        return 0
    return ScriptAgent(act)


def scoring_calls(srv: FakeLLM) -> int:
    responder = srv.responder
    assert isinstance(responder, ScriptedJudge)
    return sum(n for kind, n in responder.calls.items() if kind in ("forced", "auto", "json"))


def task_row(run: EngineRun, tid: str) -> dict[str, Any]:
    [row] = run.store.rows("tasks", lambda r: r["id"] == tid)
    return dict(row)


def transitions(run: EngineRun, tid: str) -> list[tuple[str, str, str]]:
    return [(e.data["from"], e.data["to"], e.data["trigger"]) for e in run.of("task:transition", task_id=tid)]


async def test_the_task_waits_for_a_person_and_their_pass_makes_it_done(tmp_path: Path, judge: FakeLLM) -> None:
    agent = writer()
    async with engine_on_memory(judged(tmp_path, judge), agents={"fake": agent}) as run:
        m = await run.accept(MISSION)
        tid = f"{m.id}:1"
        asked = await run.wait_event("assessment:needs-person", task_id=tid, timeout=FIRST_REVIEW)
        assert asked.data["approve"] == f"polpo approve {tid}" and "between 2.00 and 4.00" in asked.data["reason"]
        assert asked.data["globalScore"] == 3.0
        row = task_row(run, tid)
        assert row["status"] == "awaiting_review" and f"`polpo approve {tid}` passes it" in row["reason"]
        [a] = run.store.rows("assessments")
        assert (a["status"], a["passed"], a["global_score"]) == ("undecided", None, 3.0)
        assert not run.of("assessment:complete") and not run.of("task:fix") and not run.of("task:retry")
        calls = scoring_calls(judge)
        status, said = await run.engine.commands.apply("approve", encode(tid, by="ada", note="reads well"))
        assert status == "done" and said.startswith(f"{tid}: passed by ada"), said
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed"
    assert len(agent.requests) == 1 and scoring_calls(judge) == calls  # nothing ran again: no agent, no reviewer
    assert transitions(run, tid)[-3:] == [("review", "awaiting_review", "ask_review"),
                                          ("awaiting_review", "review", "reviewed"), ("review", "done", "pass")]
    row = task_row(run, tid)
    assert (row["status"], row["score"]) == ("done", 3.0)  # the panel's score: the person gave none
    [a] = run.store.rows("assessments")
    assert (a["status"], a["passed"]) == ("complete", 1)  # the same assessment, completed with their verdict
    [check] = run.store.rows("checks")
    stored = json.loads(check["scores"])
    assert check["passed"] == 1 and "undecided" not in stored
    assert stored["person"]["by"] == "ada" and stored["person"]["passed"] is True
    [label] = run.store.rows("overrides")
    assert (label["task_id"], label["passed"], label["score"], label["judge_passed"], label["judge_score"],
            label["reason"], label["by_person"]) == (tid, 1, 5.0, None, 3.0, "reads well", "ada")
    [verdict] = run.of("assessment:person-verdict")
    assert verdict.data == {"attempt": 1, "passed": True, "score": None, "reason": "reads well", "by": "ada"}


async def test_a_persons_fail_goes_on_as_a_failed_assessment_with_their_reason(tmp_path: Path,
                                                                             judge: FakeLLM) -> None:
    agent = writer()
    async with engine_on_memory(judged(tmp_path, judge), agents={"fake": agent}) as run:
        m = await run.accept(MISSION)
        tid = f"{m.id}:1"
        await run.wait_event("assessment:needs-person", task_id=tid, timeout=FIRST_REVIEW)
        status, said = await run.engine.commands.apply("reject", encode(tid, by="bob"))
        assert status == "refused" and "--reason" in said  # a fail says why: the next attempt is told it
        status, said = await run.engine.commands.apply("retry", tid)
        assert status == "refused" and f"polpo approve {tid}" in said
        assert isinstance(judge.responder, ScriptedJudge)
        judge.responder.score = 5.0  # the fix is good work: the rule passes it without a person
        status, said = await run.engine.commands.apply("reject", encode(tid, by="bob", reason="it must say hi",
                                                                         score=2))
        assert status == "done" and "a fix, a retry or the end follows" in said, said
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed"
    assert [r.kind for r in agent.requests] == ["initial", "fix"]
    feedback = agent.requests[1].feedback or ""
    assert "failed by bob, a person: it must say hi" in feedback
    fixes = run.of("task:fix", task_id=tid)
    assert [e.data["attempt"] for e in fixes] == [1]  # counted as any fix
    row = task_row(run, tid)
    assert (row["status"], row["fix_attempts"], row["score"]) == ("done", 1, 5.0)
    first = next(a for a in run.store.rows("assessments") if a["attempt_id"] == f"{tid}/1")
    assert (first["status"], first["passed"], first["global_score"]) == ("complete", 0, 2.0)  # the person's score
    [label] = run.store.rows("overrides")
    assert (label["passed"], label["score"], label["attempt_id"]) == (0, 2.0, f"{tid}/1")
    assert not run.of("assessment:judged")  # the expectation judge never second-guesses a person


async def test_a_crash_while_waiting_leaves_it_waiting_and_it_is_approved_once(tmp_path: Path,
                                                                             judge: FakeLLM) -> None:
    cfg = judged(tmp_path, judge)
    agent = writer()
    clock = FakeClock()
    store = MemoryStore(clock)
    async with engine_on_memory(cfg, agents={"fake": agent}, store=store, clock=clock, stop=False) as run:
        m = await run.accept(MISSION)
        tid = f"{m.id}:1"
        await run.wait_event("assessment:needs-person", task_id=tid, timeout=FIRST_REVIEW)
        await store.flush()
    calls = scoring_calls(judge)  # the first daemon is gone as after kill -9: nothing more was written
    async with engine_on_memory(cfg, agents={"fake": agent}, store=store, clock=clock) as again:
        assert again.engine.board.tasks[tid].status == "awaiting_review"
        assert not again.of("task:recovered") and not again.of("assessment:started")
        status, said = await again.engine.commands.apply("approve", encode(tid, by="ada", score=4))
        assert status == "done", said
        await again.wait_event("mission:completed", mission_id=m.id)
        status, said = await again.engine.commands.apply("approve", encode(tid, by="ada"))
        assert status == "refused", said  # approved once: the task is done
    assert len(agent.requests) == 1 and scoring_calls(judge) == calls
    row = task_row(again, tid)
    assert (row["status"], row["score"]) == ("done", 4.0)  # the person's score
    assert len(again.of("assessment:person-verdict")) == 1 and len(store.rows("overrides")) == 1


async def test_in_a_cluster_the_leader_decides_the_persons_verdict_and_any_node_completes_it(
        tmp_path: Path, judge: FakeLLM) -> None:
    """The task runs on W (not the leader); the person's approve is queued in the store's inbox; the leader L
    applies it once, and W claims the task again to complete the same assessment."""
    agent = writer()
    async with memory_cluster(judged(tmp_path, judge)) as c:
        await c.add("L", {"fake": agent}, dispatch=False)
        await c.add("W", {"fake": agent})
        await c.lead("L")
        m = await c.accept("L", {**MISSION, "settings": {"affinity": "any"}})
        tid = f"{m.id}:1"
        asked = await c.wait_event("assessment:needs-person", task_id=tid, timeout=FIRST_REVIEW)
        calls = scoring_calls(judge)
        cid = c.db.queue_command("approve", encode(tid, by="ada", score=5))
        done = await c.wait_event("mission:completed", mission_id=m.id, timeout=20)
    assert asked.node == "W" and done.data["outcome"] == "completed"
    [cmd] = c.rows("commands", id=cid)
    assert cmd["status"] == "done" and cmd["result"].startswith(f"{tid}: passed by ada")
    assert [e.node for e in c.of("assessment:person-verdict")] == ["L"]  # decided once, by the leader
    assert [(e.node, e.data["to"]) for e in c.of("task:transition", task_id=tid)][-3:] == [
        ("W", "awaiting_review"), ("L", "review"), ("W", "done")]
    assert len(agent.requests) == 1 and scoring_calls(judge) == calls
    [row] = c.rows("tasks", id=tid)
    assert (row["status"], row["score"]) == ("done", 5.0)
