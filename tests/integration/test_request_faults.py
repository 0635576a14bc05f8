"""A failure the evidence blames on the request is not an outage, through the real daemon against FakeLLM:

* the same 500 twice for the same request (a chat template that cannot render the conversation) fails the
  agent's attempt, and errs the review check, with that reason: no ``agent:interrupted``, no
  ``assessment:deferred``, the client sends it at most twice;
* a context overflow (HTTP 400) is never sent again unchanged;
* a generation that never ends while the server answers other requests is runaway output, not an outage, and
  so is a review that outlasts its time limit after the server answered its turns.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polpo.config import Config, load_config
from polpo.llm.client import LLMClient, LLMError, ModelSettings
from polpo.review.dimensions import Dim
from polpo.review.panel import ReviewContext, run_panel
from tests.support.daemon import mission_json, running_daemon, shell_task, submit, write_config
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, delay, endless, error, text, tool_call
from tests.support.judges import ScriptedJudge, phase

pytestmark = pytest.mark.anyio

TEMPLATE_500 = {"error": {"message": "Error rendering the chat template: 'dict object' has no attribute 'content'",
                          "type": "server_error", "param": None, "code": None}}
OVERFLOW = {"error": {"message": "the request exceeds the available context size, try increasing it",
                      "type": "exceed_context_size_error", "code": 400}}


@pytest.fixture
def srv() -> Iterator[FakeLLM]:
    with FakeLLM(models=("agent-model", "judge-model")) as server:
        yield server


def agent_config(root: Path, srv: FakeLLM, extra: str = "", agent: str = "") -> Config:
    return load_config(write_config(root, agents=f"""
[agents.coder]
type = "llm"
model = "openai/agent-model"
api_base = "{srv.base_url}"
{agent}
""", extra=f"""
[judge]
outage_backoff = 3600
{extra}
"""))


def statuses(cfg: Config) -> list[tuple[str, str]]:
    rows = sqlite3.connect(cfg.db_path).execute("SELECT status, reason FROM tasks ORDER BY id").fetchall()
    return [(str(s), str(r or "")) for s, r in rows]


def attempt_errors(cfg: Config) -> list[str]:
    rows = sqlite3.connect(cfg.db_path).execute("SELECT error FROM attempts ORDER BY number").fetchall()
    return [str(r[0] or "") for r in rows]


async def test_the_same_500_twice_fails_the_attempt_instead_of_an_outage_loop(tmp_path: Path, srv: FakeLLM) -> None:
    def respond(req: RecordedRequest) -> Reply:
        if req["messages"][-1]["role"] == "tool":  # the second turn: the template cannot render it
            return error(500, TEMPLATE_500)
        return tool_call("list_dir", {"path": "."})

    srv.responder = respond
    cfg = agent_config(tmp_path, srv, extra="[llm]\nmax_retries = 3")
    task = {"title": "List", "description": "List the workspace.", "assignTo": "coder", "maxRetries": 0}
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "m.json", mission_json(task))
        await w.wait_event("mission:completed", timeout=60)
    assert not w.of("agent:interrupted")  # an hour's backoff would have kept the test waiting
    assert [s for s, _ in statuses(cfg)] == ["failed"]
    [err] = attempt_errors(cfg)
    assert "repeated_error" in err and "rendering the chat template" in err and "not an outage" in err
    failing = [r for r in srv.requests if r["messages"][-1]["role"] == "tool"]
    assert len(failing) == 2 and failing[0].body == failing[1].body  # sent once, repeated once, then given up


async def test_a_review_whose_requests_fail_the_same_twice_is_held_at_once_not_deferred(
        tmp_path: Path, srv: FakeLLM) -> None:
    judge = ScriptedJudge(score=4)
    srv.responder = lambda req: error(500, TEMPLATE_500) if phase(req) == "explore" else judge(req)
    cfg = load_config(write_config(tmp_path, extra=f"""
[judge]
model = "openai/judge-model"
api_base = "{srv.base_url}"
outage_backoff = 3600

[llm]
max_retries = 3
"""))
    task = shell_task("greet", "echo hello > out.txt", expectations=[
        {"type": "llm_review", "criteria": "out.txt greets the user", "threshold": 3.0}])
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "m.json", mission_json(task))
        err = await w.wait_event("assessment:error", timeout=60)
    assert err.data["retryable"] is False and "repeated_error" in err.data["reason"]
    assert "not re-run" in err.data["reason"]  # the panel did not send the three failing reviews again
    assert not w.of("assessment:deferred")
    # three seats, each sent at most twice (the seats send the same request, so one seat's failure can already
    # be the repeat of another's); without the rule: four tries each and a re-run, 24
    assert 3 <= len([r for r in srv.requests if phase(r) == "explore"]) <= 6
    [(status, reason)] = statuses(cfg)
    assert status == "on_hold" and "not tried again by itself" in reason


async def test_a_context_overflow_is_never_sent_again_unchanged(tmp_path: Path, srv: FakeLLM) -> None:
    srv.responder = lambda req: error(400, OVERFLOW)
    cfg = agent_config(tmp_path, srv, extra="[llm]\nmax_retries = 3")
    task = {"title": "Big", "description": "Do it.", "assignTo": "coder", "maxRetries": 1}
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "m.json", mission_json(task))
        await w.wait_event("mission:completed", timeout=60)
    assert not w.of("agent:interrupted")
    assert [s for s, _ in statuses(cfg)] == ["failed"]
    errors = attempt_errors(cfg)
    assert len(errors) == 2 and all("context_overflow" in e and "context_window" in e for e in errors)
    bodies = [json.dumps(r.body, sort_keys=True) for r in srv.requests]
    assert len(bodies) == 2 and len(set(bodies)) == 2  # one request per attempt; the retry's differs (feedback)


async def test_a_generation_that_never_ends_while_the_server_answers_others_is_runaway(
        tmp_path: Path, srv: FakeLLM) -> None:
    def respond(req: RecordedRequest) -> Reply:
        task = req["messages"][1]["content"]
        if "LOOP" in task:
            return endless(0.2)
        deadline = time.monotonic() + 20  # answer while the looping request is being generated
        while not any("LOOP" in r["messages"][1]["content"] for r in srv.requests) and time.monotonic() < deadline:
            time.sleep(0.02)
        # a fast server: 1 000 tokens in the time this took, so a whole reply of max_tokens (256) takes far less
        # than the 2 s timeout, and the looping generation outran it
        return text("done: nothing to change", usage={"completion_tokens": 1000})

    srv.responder = respond
    cfg = agent_config(tmp_path, srv, extra="[llm]\nmax_retries = 3\nrequest_timeout = 2", agent="max_tokens = 256")
    tasks: list[dict[str, Any]] = [
        {"title": "Loops", "description": "LOOP forever.", "assignTo": "coder", "maxRetries": 0},
        {"title": "Quick", "description": "Answer.", "assignTo": "coder", "maxRetries": 0}]
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "m.json", mission_json(*tasks))
        await w.wait_event("mission:completed", timeout=60)
    assert not w.of("agent:interrupted")
    assert [s for s, _ in statuses(cfg)] == ["failed", "done"]
    loops = [r for r in srv.requests if "LOOP" in r["messages"][1]["content"]]
    assert len(loops) == 1  # not retried: another timeout would only hold the server longer
    err = next(e for e in attempt_errors(cfg) if "runaway" in e)
    assert "no complete answer within 2 s" in err and "max_tokens" in err


async def test_a_review_that_outlasts_its_time_limit_after_answers_is_runaway_and_not_re_run(
        tmp_path: Path, srv: FakeLLM) -> None:
    (tmp_path / "a.py").write_text("print('hi')\n")

    def respond(req: RecordedRequest) -> Reply:  # the first turn is answered, the second never ends
        return endless(0.2) if any(m["role"] == "tool" for m in req["messages"]) else tool_call(
            "read_file", {"path": "a.py"})

    srv.responder = respond
    ctx = ReviewContext(title="t", description="d", criteria="c", workspace=tmp_path, files_changed=["a.py"],
                        timeline="agent ran; exit 0")
    # the first turn came back at once: a whole reply of 64 tokens takes a fraction of the 1.5 s the second ran
    models = [ModelSettings("openai/judge-model", api_base=srv.base_url, timeout=60, max_tokens=64)] * 3
    result = await run_panel(LLMClient(max_retries=0), models, ctx, [Dim("correctness", 1.0, "It works")], 3.0,
                             reviewer_timeout=1.5)
    assert [r.error_kind for r in result.reviewers] == ["runaway"] * 3
    assert not result.rerun and not result.retryable  # no second round, no outage backoff
    assert len(srv.requests) == 6


async def test_a_review_that_outlasts_its_time_limit_on_a_slow_server_is_not_runaway(
        tmp_path: Path, srv: FakeLLM) -> None:
    """A loaded machine: every reply takes a second for a few tokens, so a whole reply of 512 tokens would take
    minutes; the turn in flight at the limit had run half a second. The server is slow, not looping: the review
    is run again once, and the check may be retried later."""
    (tmp_path / "a.py").write_text("print('hi')\n")
    srv.responder = lambda req: delay(1.0, tool_call("read_file", {"path": "a.py"}))
    ctx = ReviewContext(title="t", description="d", criteria="c", workspace=tmp_path, files_changed=["a.py"],
                        timeline="agent ran; exit 0")
    model = ModelSettings("openai/judge-model", api_base=srv.base_url, timeout=60, max_tokens=512)
    result = await run_panel(LLMClient(max_retries=0), [model], ctx, [Dim("correctness", 1.0, "It works")], 3.0,
                             reviewer_timeout=1.5)
    assert [r.error_kind for r in result.reviewers] == ["time_limit"] * 2
    assert result.rerun and result.retryable  # waiting may help


async def test_a_repeat_is_recognised_across_calls_but_an_unavailable_server_stays_an_outage(srv: FakeLLM) -> None:
    client = LLMClient(max_retries=0)  # no retry inside a call: the repeat is the next call (an outage retry)
    settings = ModelSettings("openai/agent-model", api_base=srv.base_url, timeout=10)
    ask = [{"role": "user", "content": "render me"}]
    srv.responder = lambda req: error(500, TEMPLATE_500)
    kinds = []
    for _ in range(2):
        with pytest.raises(LLMError) as err:
            await client.chat(settings, ask)
        kinds.append(err.value.kind)
    assert kinds == ["server", "repeated_error"]
    with pytest.raises(LLMError) as err:  # another request is not a repeat
        await client.chat(settings, [{"role": "user", "content": "something else"}])
    assert err.value.kind == "server"
    srv.responder = lambda req: error(503)
    for _ in range(3):  # "unavailable" is the same every time during a real outage: never the request's fault
        with pytest.raises(LLMError) as err:
            await client.chat(settings, [{"role": "user", "content": "are you there"}])
        assert err.value.kind == "server"
