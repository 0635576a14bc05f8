"""llm_review inside a real daemon: the judge panel over real HTTP, stored traces, fixes with scores as feedback,
dimensions reused across attempts, cheap checks first, and the expectation judge."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polpo.config import Config, load_config
from tests.support.daemon import mission_json, run_cli, running_daemon, shell_task, submit, write_config
from tests.support.fake_llm import FakeLLM, RecordedRequest
from tests.support.judges import ScriptedJudge, phase

pytestmark = pytest.mark.anyio

KEY = "sk-judge-secret-9f8e7d6c5b4a"


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv("POLPO_TEST_JUDGE_KEY", KEY)
    with FakeLLM() as server:
        yield server


def judge_config(tmp_path: Path, srv: FakeLLM, extra: str = "") -> Config:
    path = write_config(tmp_path, extra=f"""
[judge]
model = "openai/fake-model"
api_base = "{srv.base_url}"
api_key_env = "POLPO_TEST_JUDGE_KEY"

[llm]
max_retries = 0
{extra}
""")
    return load_config(path)


def db(cfg: Config) -> sqlite3.Connection:
    con = sqlite3.connect(cfg.db_path)
    con.row_factory = sqlite3.Row
    return con


def review_task(title: str, script: str, **fields: Any) -> dict[str, Any]:
    return shell_task(title, script, expectations=[
        {"type": "file_exists", "path": "out.txt"},
        {"type": "llm_review", "criteria": "out.txt greets the user politely", "threshold": 3.5}], **fields)


async def test_a_review_that_passes_stores_the_panel_and_the_task_score(tmp_path: Path, srv: FakeLLM) -> None:
    judge = ScriptedJudge(score=4.0)
    srv.responder = judge
    cfg = judge_config(tmp_path, srv)
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "greet.json", mission_json(review_task("greet", "echo hello > out.txt")))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    complete = w.of("assessment:complete")[-1]
    assert complete.data["passed"] is True
    assert complete.data["globalScore"] == pytest.approx(4.0)
    assert {s["dimension"] for s in complete.data["scores"]} == {"works", "clear", "complete"}
    con = db(cfg)
    assert con.execute("SELECT score FROM tasks").fetchone()[0] == pytest.approx(4.0)
    reviews = con.execute("SELECT reviewer, ok, data FROM reviews ORDER BY reviewer").fetchall()
    assert [r["reviewer"] for r in reviews] == [0, 1, 2]
    trace = json.loads(reviews[0]["data"])
    assert trace["ok"] is True
    assert trace["messages"], "the full conversation is stored"
    assert trace["filesRead"] is not None
    dims = con.execute("SELECT source, data FROM dimensions").fetchone()
    assert dims["source"] == "generated"
    assert judge.calls["dimensions"] == 1
    shown = run_cli("show", "greet:1", "--config", str(cfg.source))
    assert "reviewer 0 (openai/fake-model): score 4.00 via json_text" in shown.stdout, shown.stdout
    assert "dimensions (generated): works" in shown.stdout
    full = json.loads(run_cli("show", "greet:1", "--json", "--config", str(cfg.source)).stdout)
    reviewer = full["attempts"][0]["assessments"][0]["reviews"][0]
    assert reviewer["messages"] and reviewer["scores"][0]["reasoning"]
    # the key is sent to the provider but stored nowhere
    assert srv.requests[0].headers["authorization"] == f"Bearer {KEY}"
    for path in cfg.state_dir.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


async def test_low_scores_start_a_fix_whose_feedback_has_the_scores_and_dimensions_are_reused(
        tmp_path: Path, srv: FakeLLM) -> None:
    scored = []

    def score_for(req: RecordedRequest) -> float:
        scored.append(req)  # the first attempt's three reviewers score low, the fix's score high
        return 2.0 if len(scored) <= 3 else 4.5

    judge = ScriptedJudge(score_for=score_for, judge_reply='{"corrections": [{"index": 1, "verdict": "work_wrong"}]}')
    srv.responder = judge
    cfg = judge_config(tmp_path, srv)
    script = 'echo "$POLPO_FEEDBACK" > feedback-$POLPO_ATTEMPT.txt; echo hello > out.txt'
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "fix.json", mission_json(review_task("greet", script)))
        done = await w.wait_event("mission:completed")
    assessments = w.of("assessment:complete")
    assert [a.data["passed"] for a in assessments] == [False, True]
    assert w.of("task:fix")
    assert done.data["outcome"] == "completed"
    feedback = (cfg.state_dir / "workspaces" / "fix" / "feedback-2.txt").read_text()
    assert "works" in feedback and "2" in feedback  # per-dimension scores reach the agent
    assert judge.calls["dimensions"] == 1  # generated once, reused by the fix
    con = db(cfg)
    assert con.execute("SELECT COUNT(*) FROM dimensions").fetchone()[0] == 1
    triggers = [r[0] for r in con.execute("SELECT trigger FROM assessments ORDER BY created_at, id")]
    assert triggers == ["initial", "fix"]


async def test_a_failed_cheap_check_skips_the_review_and_spends_no_call(tmp_path: Path, srv: FakeLLM) -> None:
    judge = ScriptedJudge(score=5.0)
    srv.responder = judge
    cfg = judge_config(tmp_path, srv)
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "cheap.json", mission_json(review_task("greet", "echo nothing", maxRetries=0,
                                                           maxFixAttempts=0)))
        await w.wait_event("mission:completed")
    complete = w.of("assessment:complete")[0]
    assert complete.data["passed"] is False
    assert "llm_review #2 skipped: file_exists" in complete.data["message"]
    assert [r for r in srv.requests if phase(r) != "judge"] == []


async def test_the_expectation_judge_corrects_a_wrong_command_once(tmp_path: Path, srv: FakeLLM) -> None:
    judge = ScriptedJudge(judge_reply=json.dumps({"corrections": [
        {"index": 0, "verdict": "expectation_wrong", "reason": "the task asks for result.txt",
         "fix": {"command": "test -f result.txt"}}]}))
    srv.responder = judge
    cfg = judge_config(tmp_path, srv)
    task = shell_task("write", "echo 42 > result.txt", expectations=[
        {"type": "test", "command": "test -f results.txt"}])
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "judge.json", mission_json(task))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    corrected = w.of("assessment:corrected")
    assert len(corrected) == 1
    assert corrected[0].data["taskId"] == "judge:1"
    assert corrected[0].data["corrections"][0]["new"] == "test -f result.txt"
    assert [a.data["trigger"] for a in w.of("assessment:complete")] == ["initial", "judge"]
    assert not w.of("task:fix")
    con = db(cfg)
    row = con.execute("SELECT expectations, judge_used FROM tasks").fetchone()
    assert json.loads(row["expectations"])[0]["command"] == "test -f result.txt"
    spec = json.loads(con.execute("SELECT spec FROM missions").fetchone()[0])
    assert spec["tasks"][0]["expectations"][0]["command"] == "test -f results.txt"  # the original is kept
