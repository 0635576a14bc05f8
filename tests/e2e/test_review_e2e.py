"""The review loop through the real `polpo daemon` process: judges over HTTP, a fix that passes, a kill -9
in the middle of a review that resumes without re-running the agent, and no API key anywhere on disk."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemon import daemon_process, mission_json, run_cli, shell_task, wait_events, write_config
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, delay
from tests.support.judges import ScriptedJudge, phase

KEY = "sk-e2e-judge-5a4b3c2d1e0f"


@pytest.fixture
def srv() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def config(tmp_path: Path, srv: FakeLLM) -> Path:
    return write_config(tmp_path, extra=f"""
[judge]
model = "openai/fake-model"
api_base = "{srv.base_url}"
api_key_env = "E2E_JUDGE_KEY"
correct_expectations = false
""")


def review_mission(script: str) -> str:
    return mission_json(shell_task("greet", script, expectations=[
        {"type": "file_exists", "path": "out.txt"},
        {"type": "llm_review", "criteria": "out.txt greets politely", "threshold": 3.5,
         "dimensions": [{"name": "politeness", "weight": 1, "description": "Is it polite?"}]}]))


def test_review_fails_then_the_fix_passes_and_the_key_stays_secret(tmp_path: Path, srv: FakeLLM) -> None:
    scored: list[RecordedRequest] = []

    def score_for(req: RecordedRequest) -> float:
        scored.append(req)
        return 2.0 if len(scored) <= 3 else 4.0

    srv.responder = ScriptedJudge(score_for=score_for)
    cfg = config(tmp_path, srv)
    (tmp_path / "missions" / "greet.json").write_text(
        review_mission('echo "$POLPO_PROMPT" > prompt-$POLPO_ATTEMPT.txt; echo hello > out.txt'))
    with daemon_process(cfg, env={"E2E_JUDGE_KEY": KEY}):
        evs = wait_events(tmp_path / "state", lambda es: any(e["event"] == "mission:completed" for e in es), 60)
    done = next(e for e in evs if e["event"] == "mission:completed")
    assert done["data"]["outcome"] == "completed"
    assert [e["data"]["passed"] for e in evs if e["event"] == "assessment:complete"] == [False, True]
    fix_prompt = (tmp_path / "state" / "workspaces" / "greet" / "prompt-2.txt").read_text()
    assert "politeness" in fix_prompt and "politeness looks ok" in fix_prompt  # the reviewers' reasoning
    shown = json.loads(run_cli("show", "greet:1", "--json", "--config", str(cfg)).stdout)
    reviews = shown["attempts"][0]["assessments"][0]["reviews"]
    assert [r["index"] for r in reviews] == [0, 1, 2] and all(r["messages"] for r in reviews)
    assert srv.requests[0].headers["authorization"] == f"Bearer {KEY}"
    for path in (tmp_path / "state").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_kill_9_during_a_review_resumes_it_without_rerunning_the_agent(tmp_path: Path, srv: FakeLLM) -> None:
    judge = ScriptedJudge(score=4.0)
    first_round = True

    def slow_first_round(req: RecordedRequest) -> Reply:
        reply = judge(req)
        if first_round and phase(req) in ("explore", "output"):
            return delay(30, reply)  # the daemon is killed while it waits for this
        return reply

    srv.responder = slow_first_round
    cfg = config(tmp_path, srv)
    (tmp_path / "missions" / "greet.json").write_text(
        review_mission("echo run >> runs.log; echo hello > out.txt"))
    state = tmp_path / "state"
    with daemon_process(cfg, env={"E2E_JUDGE_KEY": KEY}) as proc:
        wait_events(state, lambda es: any(e["event"] == "assessment:check:started" and e["data"]["type"]
                                          == "llm_review" for e in es), 60)
        srv.wait_for_requests(1, timeout=30)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    first_round = False
    time.sleep(0.1)
    with daemon_process(cfg, env={"E2E_JUDGE_KEY": KEY}):
        evs = wait_events(state, lambda es: any(e["event"] == "mission:completed" for e in es), 60)
    assert next(e for e in evs if e["event"] == "mission:completed")["data"]["outcome"] == "completed"
    assert (state / "workspaces" / "greet" / "runs.log").read_text().split() == ["run"]  # never re-run
    assert [e["event"] for e in evs].count("agent:spawned") == 1
