"""The judge's shape from the config: ``[judge] seats`` (a one-seat panel reaches a verdict and every report of
it reads as one reviewer) and ``[judge] max_turns`` (a reviewer that keeps exploring stops there)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from polpo.config import ConfigError, load_config
from tests.support.daemon import mission_json, run_cli, running_daemon, shell_task, submit, write_config
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, tool_call
from tests.support.judges import ScriptedJudge, phase

pytestmark = pytest.mark.anyio


@pytest.fixture
def srv() -> Iterator[FakeLLM]:
    with FakeLLM(strict="llama-cpp") as server:
        yield server


def judge_config(tmp_path: Path, srv: FakeLLM, judge: str) -> Path:
    return write_config(tmp_path, extra=f"""
[judge]
model = "openai/fake-model"
api_base = "{srv.base_url}"
{judge}

[llm]
max_retries = 0
""")


def review_task() -> str:
    return mission_json(shell_task("greet", "echo hello > out.txt", expectations=[
        {"type": "llm_review", "criteria": "out.txt greets the user politely", "threshold": 3.5}]))


async def test_a_one_seat_panel_reaches_a_verdict_and_reads_as_one_reviewer(tmp_path: Path, srv: FakeLLM) -> None:
    judge = ScriptedJudge(score=4.0)
    srv.responder = judge
    cfg = load_config(judge_config(tmp_path, srv, "seats = 1"))
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "greet.json", review_task())
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    complete = w.of("assessment:complete")[-1]
    assert complete.data["passed"] is True and complete.data["globalScore"] == pytest.approx(4.0)
    assert judge.calls["explore"] == 1 and judge.calls["json"] == 1  # one reviewer, one run
    con = sqlite3.connect(cfg.db_path)
    assert [r[0] for r in con.execute("SELECT reviewer FROM reviews")] == [0]
    shown = run_cli("show", "greet:1", "--config", str(cfg.source)).stdout
    assert "one reviewer (no consensus)" in shown, shown
    assert "reviewer 0 (openai/fake-model): score 4.00 via json_text" in shown
    assert "single reviewer succeeded" not in shown and "reviewer 1" not in shown
    full = json.loads(run_cli("show", "greet:1", "--json", "--config", str(cfg.source)).stdout)
    check = full["attempts"][0]["assessments"][0]["checks"][0]
    assert check["scores"]["review"]["seats"] == 1
    assert [v["reviewer"] for d in check["scores"]["review"]["scores"] for v in d["reviewerScores"]] == [0, 0, 0]
    assert srv.refusals == []


async def test_a_reviewer_stops_exploring_at_max_turns(tmp_path: Path, srv: FakeLLM) -> None:
    judge = ScriptedJudge(score=4.0)

    def respond(req: RecordedRequest) -> Reply:
        if phase(req) == "explore" and req.get("tool_choice") != "none":
            return tool_call("read_file", {"path": "out.txt"})  # a reviewer that would explore for ever
        return judge(req)

    srv.responder = respond
    cfg = load_config(judge_config(tmp_path, srv, "seats = 1\nmax_turns = 3"))
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "greet.json", review_task())
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    explore = [r for r in srv.requests if phase(r) == "explore"]
    assert [r["tool_choice"] for r in explore] == ["auto", "auto", "none"]
    assert "at most 3 " in explore[0]["messages"][1]["content"]  # the prompt names the budget
    con = sqlite3.connect(cfg.db_path)
    trace = json.loads(con.execute("SELECT data FROM reviews").fetchone()[0])
    assert trace["ok"] is True and trace["turns"] == 3 and trace["filesRead"] == ["out.txt"]
    assert phase(srv.requests[-1]) == "json"  # then it scored


def test_more_models_than_seats_is_a_config_error(tmp_path: Path) -> None:
    path = write_config(tmp_path, extra='[judge]\nmodels = ["openai/a", "openai/b"]\nseats = 1\n')
    with pytest.raises(ConfigError, match="2 models for 1 seat"):
        load_config(path)
    cfg = load_config(write_config(tmp_path, extra='[judge]\nmodels = ["openai/a", "openai/b"]\nseats = 5\n'))
    assert cfg.judge.panel_models() == ["openai/a", "openai/b", "openai/a", "openai/b", "openai/a"]
