"""`polpo rejudge`: stored work judged again under another judge, through the real CLI and a real daemon's state.

A mission is judged by a judge that scores 4 (it passes); `polpo rejudge` with a config whose judge scores 2
prints the changed verdict, stores the new review beside the old one (which stays as it was), and `polpo show`
lists both. A workspace changed after the attempt is judged from the copy the review stored, not from its new
files; a labels file names the tasks to rejudge.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemon import daemon_process, mission_json, run_cli, shell_task, wait_events, write_config
from tests.support.fake_llm import FakeLLM
from tests.support.judges import ScriptedJudge

pytestmark = pytest.mark.slow


@pytest.fixture
def judges() -> Iterator[tuple[FakeLLM, FakeLLM]]:
    with FakeLLM() as passing, FakeLLM() as failing:
        passing.responder = ScriptedJudge(score=4.0)
        failing.responder = ScriptedJudge(score=2.0)
        yield passing, failing


def judge_block(srv: FakeLLM) -> str:
    return f"""
[judge]
model = "openai/fake-model"
api_base = "{srv.base_url}"
seats = 1
correct_expectations = false
"""


def judged_mission(tmp_path: Path, srv: FakeLLM) -> Path:
    cfg = write_config(tmp_path, extra=judge_block(srv))
    review = {"type": "llm_review", "criteria": "out.txt greets politely", "threshold": 3.0,
              "dimensions": [{"name": "politeness", "weight": 1, "description": "Is it polite?"}]}
    (tmp_path / "missions" / "greet.json").write_text(
        mission_json(shell_task("greet", "echo 'hello there' > out.txt", expectations=[review])))
    with daemon_process(cfg):
        wait_events(tmp_path / "state", lambda es: any(e["event"] == "mission:completed" for e in es), 180)
    return cfg


def other_config(tmp_path: Path, srv: FakeLLM) -> Path:
    other = tmp_path / "other.toml"
    other.write_text(judge_block(srv))
    return other


def test_rejudge_prints_the_changed_verdict_and_keeps_both_reviews(
        tmp_path: Path, judges: tuple[FakeLLM, FakeLLM]) -> None:
    passing, failing = judges
    cfg = judged_mission(tmp_path, passing)
    before = json.loads(run_cli("show", "greet:1", "--json", "--config", str(cfg)).stdout)
    other = other_config(tmp_path, failing)

    out = run_cli("rejudge", "greet", "--judge-config", str(other), "--config", str(cfg))
    assert out.returncode == 0, out.stderr
    assert "greet:1 attempt 1: pass (score 4.00) → fail (score 2.00)" in out.stdout, out.stdout
    assert "1 review(s) rejudged by openai/fake-model, 1 verdict(s) changed" in out.stdout
    assert failing.requests and not [r for r in passing.requests if r.received_at > failing.requests[0].received_at]

    again = run_cli("rejudge", "greet:1", "--judge-config", str(other), "--config", str(cfg), "--json")
    data = json.loads(again.stdout)
    assert data["changed"] == 1 and data["rejudged"][0]["source"] == "workspace"

    after = json.loads(run_cli("show", "greet:1", "--json", "--config", str(cfg)).stdout)
    assert after["attempts"] == before["attempts"] and after["status"] == "done"  # the task is as it was
    rows = after["rejudgements"]
    assert [(r["decision"], r["global_score"], r["was_passed"]) for r in rows] == [("fail", 2.0, 1)] * 2
    text = run_cli("show", "greet:1", "--config", str(cfg)).stdout
    assert text.count("rejudged ") == 2 and "fail (score 2.00; was pass)" in text, text


def test_a_changed_workspace_is_judged_from_the_stored_copy(
        tmp_path: Path, judges: tuple[FakeLLM, FakeLLM]) -> None:
    passing, failing = judges
    cfg = judged_mission(tmp_path, passing)
    (tmp_path / "state" / "workspaces" / "greet" / "out.txt").write_text("GO AWAY\n")
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"id": "greet:1", "task": "greet", "score": 5, "output": "x"}) + "\n")

    out = run_cli("rejudge", "--labels", str(labels), "--judge-config", str(other_config(tmp_path, failing)),
                  "--config", str(cfg))
    assert out.returncode == 0, out.stderr
    assert "[judged from the stored copy: the workspace changed since]" in out.stdout, out.stdout
    seen = " ".join(json.dumps(r.body) for r in failing.requests)
    assert "hello there" in seen and "GO AWAY" not in seen


def test_rejudge_names_what_it_cannot_do(tmp_path: Path, judges: tuple[FakeLLM, FakeLLM]) -> None:
    passing, _ = judges
    cfg = judged_mission(tmp_path, passing)
    unknown = run_cli("rejudge", "nope", "--config", str(cfg))
    assert unknown.returncode == 1 and "no mission or task 'nope'" in unknown.stderr
    judgeless = tmp_path / "nojudge.toml"
    judgeless.write_text("[llm]\nmax_retries = 0\n")
    refused = run_cli("rejudge", "greet", "--judge-config", str(judgeless), "--config", str(cfg))
    assert refused.returncode == 1 and "no LLM judge is configured" in refused.stderr
