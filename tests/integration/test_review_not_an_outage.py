"""Bad output or a refused request is not an outage: a panel whose every reviewer was refused (a context-window
overflow is an HTTP 400) is not re-run unchanged, and a review where every reviewer gave invalid output puts the
task on hold at once with the reason, with no outage backoff (``assessment:deferred``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from polpo.config import load_config
from polpo.llm.client import LLMClient, ModelSettings
from polpo.review.dimensions import Dim
from polpo.review.panel import ReviewContext, run_panel
from tests.support.daemon import mission_json, running_daemon, shell_task, submit, write_config
from tests.support.fake_llm import FakeLLM, error
from tests.support.judges import ScriptedJudge

pytestmark = pytest.mark.anyio

OVERFLOW = {"error": {"message": "This model's maximum context length is 8192 tokens. However, your messages "
                                 "resulted in 9500 tokens.", "type": "invalid_request_error", "param": "messages",
                      "code": "context_length_exceeded"}}


@pytest.fixture
def srv() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


async def test_a_panel_refused_by_the_provider_is_not_re_run(srv: FakeLLM, tmp_path: Path) -> None:
    srv.responder = lambda req: error(400, OVERFLOW)
    client = LLMClient(max_retries=2, backoff=0.01)
    ctx = ReviewContext(title="t", description="d", criteria="c", workspace=tmp_path, files_changed=["a.py"],
                        timeline="agent ran; exit 0")
    models = [ModelSettings("openai/fake-model", api_base=srv.base_url, timeout=10)] * 3
    result = await run_panel(client, models, ctx, [Dim("correctness", 1.0, "It works")], 3.0)
    assert result.global_score is None and not result.rerun and not result.retryable
    assert len(result.reviewers) == 3 and len(srv.requests) == 3  # one call each: no retry, no second round
    assert result.error is not None and "not re-run" in result.error and "context_overflow" in result.error


async def test_invalid_output_from_every_reviewer_holds_the_task_without_backoff(tmp_path: Path,
                                                                              srv: FakeLLM) -> None:
    judge = ScriptedJudge(score=7)  # off the 1..5 scale: every strategy of every reviewer is invalid
    srv.responder = judge
    cfg = load_config(write_config(tmp_path, extra=f"""
[judge]
model = "openai/fake-model"
api_base = "{srv.base_url}"
outage_backoff = 3600

[llm]
max_retries = 0
"""))
    task = shell_task("greet", "echo hello > out.txt", expectations=[
        {"type": "llm_review", "criteria": "out.txt greets the user politely", "threshold": 3.5}])
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "m.json", mission_json(task))
        err = await w.wait_event("assessment:error", timeout=60)
    assert err.data["retryable"] is False
    assert "all reviewers failed, twice" in err.data["reason"] and "outside 1..5" in err.data["reason"]
    assert not w.of("assessment:deferred")  # a backoff of an hour would have kept the test waiting
    assert judge.calls["forced"] == 6  # three seats, and the panel's one re-run
    status, reason = sqlite3.connect(cfg.db_path).execute("SELECT status, reason FROM tasks").fetchone()
    assert status == "on_hold" and "not tried again by itself" in reason
