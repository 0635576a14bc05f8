"""An LLM agent whose own model provider fails is interrupted, not failed: the real LLM agent against FakeLLM,
the engine on the memory store, backoff on a FakeClock."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polpo.model.status import AttemptStatus, TaskStatus
from tests.support.engine import EngineRun, config, engine_on_memory
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, error, text

pytestmark = pytest.mark.anyio
KEY_ENV = "POLPO_AGENT_OUTAGE_KEY"


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv(KEY_ENV, "sk-agent")
    with FakeLLM() as server:
        yield server


def agent_cfg(root: Path, srv: FakeLLM) -> Any:
    return config(root, f"""
[judge]
outage_retries = 2
outage_backoff = 10
[llm]
max_retries = 0
[agents.bot]
type = "llm"
model = "openai/fake-model"
api_base = "{srv.base_url}"
api_key_env = "{KEY_ENV}"
""")


class Down:
    """503 for the first ``n`` requests (or until ``up()``), then a final answer."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.lock = threading.Lock()

    def up(self) -> None:
        with self.lock:
            self.n = 0

    def __call__(self, req: RecordedRequest) -> Reply:
        with self.lock:
            if self.n > 0:
                self.n -= 1
                return error(503)
        return text("done: nothing to change")


def sleeper(run: EngineRun, slept: list[float]) -> Any:
    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        run.clock.advance(seconds)
    return sleep


TASK = {"tasks": [{"title": "t", "description": "answer", "assignTo": "bot"}]}


async def test_a_provider_outage_interrupts_the_attempt_and_it_runs_again_without_a_retry(
        tmp_path: Path, srv: FakeLLM) -> None:
    srv.responder = Down(2)
    slept: list[float] = []
    async with engine_on_memory(agent_cfg(tmp_path, srv)) as run:
        run.engine.runner.outage.sleep = sleeper(run, slept)
        run.engine.runner.outage.rng = lambda: 0.0  # the nominal delays (full jitter draws below them)
        m = await run.accept(TASK)
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed"
    attempts = sorted(run.store.rows("attempts"), key=lambda a: a["number"])
    assert [a["status"] for a in attempts] == [AttemptStatus.INTERRUPTED, AttemptStatus.INTERRUPTED,
                                               AttemptStatus.FINISHED]
    assert "model call failed (server)" in attempts[0]["error"]
    assert [a["kind"] for a in attempts] == ["initial"] * 3  # the same attempt again, not a retry
    assert slept == [10.0, 20.0]
    assert [e.data["retry"] for e in run.of("agent:interrupted")] == [1, 2]
    assert not run.of("task:retry") and not run.of("task:fix") and not run.of("assessment:started", attempt=1)
    [t] = run.store.rows("tasks")
    assert (t["retries"], t["fix_attempts"]) == (0, 0)


async def test_a_lasting_outage_holds_the_task_and_retry_runs_it_again(tmp_path: Path, srv: FakeLLM) -> None:
    down = Down(10_000)
    srv.responder = down
    slept: list[float] = []
    async with engine_on_memory(agent_cfg(tmp_path, srv)) as run:
        run.engine.runner.outage.sleep = sleeper(run, slept)
        run.engine.runner.outage.rng = lambda: 0.0  # the nominal delays (full jitter draws below them)
        m = await run.accept(TASK)
        tid = f"{m.id}:1"
        waiting = await run.wait_event("agent:interrupted", task_id=tid, waiting=True)
        assert waiting.data["retryable"] is True and slept == [10.0, 20.0]
        [t] = run.store.rows("tasks")
        assert t["status"] == TaskStatus.ON_HOLD and "model provider failed" in t["reason"]
        down.up()
        assert await run.engine.commands.retry_task(tid) == f"running {tid} again"
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed"
    assert [a["status"] for a in sorted(run.store.rows("attempts"), key=lambda a: a["number"])][-1] == "finished"
