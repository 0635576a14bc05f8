"""A judge that cannot be reached is nobody's verdict: the engine on the memory store, the judge over real HTTP.

The agent runs once; the assessment is tried again with backoff (time driven by a FakeClock, no sleeping);
when the retries are spent the task waits on hold with ``assessment:error``, and ``polpo retry`` (the command)
runs only the assessment once the endpoint is back.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polpo.agents.base import AgentRequest
from polpo.model.status import TaskStatus
from tests.support.engine import EngineRun, ScriptAgent, config, engine_on_memory
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, error
from tests.support.judges import ScriptedJudge

pytestmark = pytest.mark.anyio

KEY_ENV = "POLPO_OUTAGE_TEST_KEY"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-outage-test")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def judge_cfg(root: Path, port: int, extra: str = "", *, retries: int = 2) -> Any:
    return config(root, f"""
[judge]
model = "openai/fake-model"
api_base = "http://127.0.0.1:{port}/v1"
api_key_env = "{KEY_ENV}"
outage_retries = {retries}
outage_backoff = 30
{extra}
[llm]
max_retries = 0
""")


def writes_hello() -> ScriptAgent:
    def act(r: AgentRequest) -> int:
        (r.workspace / "out.txt").write_text("hello\n")
        return 0
    return ScriptAgent(act)


MISSION = {"tasks": [{"title": "greet", "description": "write out.txt", "assignTo": "fake", "expectations": [
    {"type": "file_exists", "path": "out.txt"},
    {"type": "llm_review", "criteria": "out.txt greets the user", "threshold": 3.0}]}]}


def fake_sleep(run: EngineRun, slept: list[float]) -> Any:
    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        run.clock.advance(seconds)
    return sleep


@pytest.fixture
def port() -> Iterator[int]:
    yield free_port()


async def test_a_dead_judge_runs_the_agent_once_holds_the_task_and_retry_passes_it(tmp_path: Path, port: int) -> None:
    agent = writes_hello()
    slept: list[float] = []
    async with engine_on_memory(judge_cfg(tmp_path, port), agents={"fake": agent}) as run:
        run.engine.runner.outage.sleep = fake_sleep(run, slept)
        run.engine.runner.outage.rng = lambda: 0.0  # the nominal delays (full jitter draws below them)
        start = run.clock.monotonic()
        m = await run.accept(MISSION)
        tid = f"{m.id}:1"
        err = await run.wait_event("assessment:error", task_id=tid)
        assert err.data["taskId"] == tid and err.data["retryable"] is True
        assert "connection" in err.data["reason"]
        # backoff: 30 s then 60 s, on the fake clock; no fix, no retry, the agent ran once
        assert slept == [30.0, 60.0] and run.clock.monotonic() - start == 90.0
        assert [e.data["delay"] for e in run.of("assessment:deferred")] == [30.0, 60.0]
        assert not run.of("task:fix") and not run.of("task:retry") and len(agent.requests) == 1
        [t] = run.store.rows("tasks", lambda r: r["id"] == tid)
        assert t["status"] == TaskStatus.ON_HOLD and "polpo retry" in t["reason"]
        assert (t["retries"], t["fix_attempts"], t["total_fixes"]) == (0, 0, 0)
        assert run.store.rows("dimensions") == []  # no yardstick stored from a failed generation
        [check] = run.store.rows("checks", lambda r: r["type"] == "llm_review")
        assert check["passed"] == 0 and '"error"' in check["scores"]
        [assessment] = run.store.rows("assessments")
        assert assessment["status"] == "running"  # undecided, resumable

        with FakeLLM(port=port) as srv:  # the endpoint is back
            srv.responder = ScriptedJudge(score=4.0)
            answer = await run.engine.commands.retry_task(tid)
            assert "agent does not run again" in answer
            done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed"
    assert len(agent.requests) == 1  # the agent never ran again
    [assessment] = run.store.rows("assessments")
    assert assessment["status"] == "complete" and assessment["passed"] == 1
    complete = run.of("assessment:complete")
    assert len(complete) == 1 and complete[0].data["passed"] is True
    transitions = [(e.data["from"], e.data["to"]) for e in run.of("task:transition", task_id=tid)]
    assert ("review", "on_hold") in transitions and ("on_hold", "review") in transitions
    assert transitions[-1] == ("review", "done")


async def test_a_burst_of_500s_is_waited_out_without_blaming_the_agent(tmp_path: Path, port: int) -> None:
    judge = ScriptedJudge(score=4.0)
    lock = threading.Lock()
    seen = [0]

    def answer(req: RecordedRequest) -> Reply:
        with lock:
            seen[0] += 1
            n = seen[0]
            burst = n <= 3
        # each with its own request id, as a provider's 500s carry: the same body twice would blame the request
        return error(500, {"error": {"message": f"server error (request id req_{n})",
                                     "type": "server_error"}}) if burst else judge(req)

    agent = writes_hello()
    slept: list[float] = []
    with FakeLLM(port=port) as srv:
        srv.responder = answer
        async with engine_on_memory(judge_cfg(tmp_path, port, retries=5), agents={"fake": agent}) as run:
            run.engine.runner.outage.sleep = fake_sleep(run, slept)
            run.engine.runner.outage.rng = lambda: 0.0  # the nominal delays (full jitter draws below them)
            m = await run.accept(MISSION)
            done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed"
    assert len(agent.requests) == 1 and not run.of("task:fix") and not run.of("assessment:error")
    # three generation calls hit the burst (one per try), the fourth try generated and reviewed
    assert slept == [30.0, 60.0, 120.0]
    assert all("server" in e.data["reason"] for e in run.of("assessment:deferred"))
    [dims] = run.store.rows("dimensions")
    assert dims["source"] == "generated"  # stored once, from the answer that worked


async def test_a_refused_key_holds_at_once_since_waiting_cannot_help(tmp_path: Path, port: int) -> None:
    agent = writes_hello()
    slept: list[float] = []
    with FakeLLM(port=port) as srv:
        srv.responder = lambda req: error(401)
        async with engine_on_memory(judge_cfg(tmp_path, port), agents={"fake": agent}) as run:
            run.engine.runner.outage.sleep = fake_sleep(run, slept)
            run.engine.runner.outage.rng = lambda: 0.0  # the nominal delays (full jitter draws below them)
            m = await run.accept(MISSION)
            err = await run.wait_event("assessment:error", task_id=f"{m.id}:1")
    assert err.data["retryable"] is False and "auth" in err.data["reason"]
    assert slept == [] and len(agent.requests) == 1 and not run.of("task:fix")


async def test_a_failed_cheap_check_is_still_the_agents_failure_when_the_judge_is_down(
        tmp_path: Path, port: int) -> None:
    """The outage rule does not hide real failures: a missing file fails before the judge is asked."""
    agent = ScriptAgent(lambda r: 0)  # writes nothing
    async with engine_on_memory(judge_cfg(tmp_path, port), agents={"fake": agent}) as run:
        m = await run.accept(MISSION)
        await run.wait_event("mission:completed", mission_id=m.id)
    assert run.of("task:fix") and not run.of("assessment:error") and not run.of("assessment:deferred")
