"""Expected outcomes: told to the agent and to the reviewers, declared by a command agent through $POLPO_OUTCOMES
(a real subprocess), and a required outcome that was not delivered fails a cheap check that names it."""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polpo.agents.base import AgentRequest
from polpo.agents.command import CommandAgent, outcomes_dir
from polpo.agents.prompts import build_prompt
from polpo.checks.outcomes import check_outcomes
from polpo.clock import SystemClock
from polpo.model.status import AttemptKind
from tests.support.engine import ScriptAgent, config, engine_on_memory, result
from tests.support.fake_llm import FakeLLM
from tests.support.judges import ScriptedJudge, phase
from tests.support.mounts import mounts

pytestmark = pytest.mark.anyio

REPORT = {"type": "file", "label": "Audit Report", "path": "audit-report.md", "mimeType": "text/markdown"}
SUMMARY = {"type": "text", "label": "Summary", "description": "Two lines for the team"}
OPTIONAL = {"type": "url", "label": "Preview", "required": False}


def test_a_required_outcome_missing_fails_naming_it(tmp_path: Path) -> None:
    res = check_outcomes([REPORT, SUMMARY, OPTIONAL], [{"type": "text", "label": "summary ", "value": "ok"}],
                         tmp_path)
    assert not res.passed and res.type == "expected_outcomes"
    assert res.message == "Missing 1/2 required outcome(s): 'Audit Report' (file audit-report.md)"
    (tmp_path / "audit-report.md").write_text("# report")  # a file outcome whose path exists counts
    assert check_outcomes([REPORT, SUMMARY, OPTIONAL], [{"type": "text", "label": "Summary", "value": "ok"}],
                          tmp_path).passed


def test_the_prompt_lists_the_outcomes_and_how_to_declare_them() -> None:
    p = build_prompt(title="Audit", description="Audit the site", mission_name="m", mission_description=None,
                     expectations=[], kind="initial", feedback=None, expected_outcomes=[REPORT, OPTIONAL])
    assert "Deliver these outcomes" in p and "'Audit Report' (file audit-report.md)" in p
    assert "'Preview' (url) (optional)" in p and "$POLPO_OUTCOMES" in p and "register_outcome" in p


def request(ws: Path, **fields: Any) -> AgentRequest:
    return AgentRequest(task_id="m:1", mission_id="m", mission_name="m", attempt_id="m:1/1", attempt_number=1,
                        kind=AttemptKind.INITIAL, title="t", description="d", prompt="p", feedback=None,
                        workspace=ws, timeout=30, expectations=[], env_marker=("POLPO_TEST_MARK", "x"), **fields)


async def test_a_command_agent_declares_outcomes_in_polpo_outcomes(tmp_path: Path) -> None:
    script = r"""
import json, os, sys
doc = json.load(sys.stdin)
assert doc["expectedOutcomes"][0]["label"] == "Audit Report"
open("audit-report.md", "w").write("# report")
with open(os.environ["POLPO_OUTCOMES"], "a") as f:
    f.write(json.dumps({"type": "file", "label": "Audit Report", "path": "audit-report.md"}) + "\n")
    f.write(json.dumps({"type": "text", "label": "Summary", "value": "first"}) + "\n")
    f.write("not json\n")
    f.write(json.dumps({"type": "file", "label": "Ghost", "path": "nope.md"}) + "\n")
    f.write(json.dumps({"type": "text", "label": "Summary", "value": "second"}) + "\n")
print(os.environ["POLPO_OUTCOMES"])
"""
    agent = CommandAgent("dev", [sys.executable, "-c", script], clock=SystemClock())
    res = await agent.run(request(tmp_path, expected_outcomes=[REPORT]), on_start=lambda pid: None)
    assert res.exit_code == 0, res.stderr_tail
    assert res.outcomes == [{"type": "file", "label": "Audit Report", "value": "audit-report.md",
                             "path": "audit-report.md"},
                            {"type": "text", "label": "Summary", "value": "second"}]
    assert "[polpo] $POLPO_OUTCOMES line 3 ignored" in res.stderr_tail
    assert "[polpo] $POLPO_OUTCOMES line 4 ignored" in res.stderr_tail and "nope.md" in res.stderr_tail
    assert not Path(res.stdout_tail.strip()).exists()  # the file is removed once read


async def test_polpo_outcomes_names_a_file_in_a_private_folder_that_comes_back_if_removed(tmp_path: Path) -> None:
    script = "import os; print(os.environ['POLPO_OUTCOMES']); print(os.path.exists(os.environ['POLPO_OUTCOMES']))"
    agent = CommandAgent("dev", [sys.executable, "-c", script], clock=SystemClock())
    first = (await agent.run(request(tmp_path), on_start=lambda pid: None)).stdout_tail.split()
    folder = Path(first[0]).parent
    assert first[1] == "False"  # nothing made in advance: the agent creates it if it declares an outcome
    info = folder.stat()
    assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.getuid()
    shutil.rmtree(folder)  # a /tmp cleaner took it between two attempts
    second = (await agent.run(request(tmp_path), on_start=lambda pid: None)).stdout_tail.split()
    assert Path(second[0]).parent.is_dir() and Path(second[0]).parent != folder


async def test_a_daemons_outcomes_folder_is_in_its_state_folder_and_a_dead_daemons_files_are_cleared(
        tmp_path: Path) -> None:
    folder = tmp_path / "state" / "outcomes"
    folder.mkdir(parents=True)
    (folder / "999-1.jsonl").write_text('{"type": "text", "label": "Summary", "value": "stale"}\n')  # kill -9 left it
    script = "import os; print(os.environ['POLPO_OUTCOMES'])"
    agent = CommandAgent("dev", [sys.executable, "-c", script], clock=SystemClock(), outcomes_dir=str(folder))
    res = await agent.run(request(tmp_path / "ws"), on_start=lambda pid: None)
    assert Path(res.stdout_tail.strip()).parent == folder
    assert res.outcomes == [] and list(folder.iterdir()) == []  # the stale file was not read, and is gone
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


async def test_a_task_whose_required_outcome_is_missing_gets_a_fix_that_names_it(tmp_path: Path) -> None:
    def act(r: AgentRequest) -> Any:
        if r.kind == "fix":
            (r.workspace / "audit-report.md").write_text("# report")
        return result(0)
    agent = ScriptAgent(act)
    task = {"title": "audit", "description": "audit the site", "assignTo": "fake", "expectedOutcomes": [REPORT],
            "expectations": [{"type": "test", "command": "true"}]}
    async with engine_on_memory(config(tmp_path), agents={"fake": agent}) as run:
        m = await run.accept({"tasks": [task]})
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed"
    first = run.of("assessment:complete")[0]
    assert not first.data["passed"] and "'Audit Report' (file audit-report.md)" in first.data["message"]
    checks = [(c.data["type"], c.data["passed"], c.data["tier"]) for c in run.of("assessment:check:complete")][:1]
    assert checks == [("expected_outcomes", False, "outcomes")]
    assert [r.kind for r in agent.requests] == ["initial", "fix"]
    assert agent.requests[1].feedback is not None and "Audit Report" in agent.requests[1].feedback
    assert agent.requests[0].expected_outcomes[0]["label"] == "Audit Report"
    assert "Deliver these outcomes" in agent.requests[0].prompt


@pytest.fixture
def judge(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv("POLPO_OUTCOMES_JUDGE_KEY", "sk-o")
    with FakeLLM() as srv:
        srv.responder = ScriptedJudge(score=4.0)
        yield srv


async def test_the_reviewers_are_told_the_expected_outcomes(tmp_path: Path, judge: FakeLLM) -> None:
    cfg = config(tmp_path, f"""
[judge]
model = "openai/fake-model"
api_base = "{judge.base_url}"
api_key_env = "POLPO_OUTCOMES_JUDGE_KEY"
[llm]
max_retries = 0
""")
    task = {"title": "audit", "description": "audit the site", "assignTo": "fake", "expectedOutcomes": [SUMMARY],
            "expectations": [{"type": "llm_review", "criteria": "the summary is useful",
                              "dimensions": [{"name": "useful", "weight": 1}]}]}
    declared = [{"type": "text", "label": "Summary", "value": "all good"}]
    agent = ScriptAgent(lambda r: dataclasses.replace(result(0, stdout="done"), outcomes=declared))
    async with engine_on_memory(cfg, agents={"fake": agent}) as run:
        m = await run.accept({"tasks": [task]})
        done = await run.wait_event("mission:completed", mission_id=m.id)
    assert done.data["outcome"] == "completed"
    reviews = [r for r in judge.requests if phase(r) == "output"]
    assert reviews and all("Expected outcomes (deliverables the task must produce):\n- Summary (text): Two lines"
                           in r["messages"][1]["content"] for r in reviews)
    assert all("Declared outcomes:\n- text: Summary: all good" in r["messages"][1]["content"] for r in reviews)
    assert [c.data["type"] for c in run.of("assessment:check:complete")] == ["expected_outcomes", "llm_review"]


def test_a_read_only_state_folder_gives_the_outcomes_file_a_private_temp_folder(tmp_path: Path) -> None:
    """Found by the nemesis (seed 0): with the state folder read-only, clearing the daemon's outcomes folder
    failed silently and making it again raised EEXIST, so every task that started failed with an internal error.
    A passing fault there now falls back to this process's own folder in the temp folder."""
    folder = tmp_path / "state" / "outcomes"
    folder.mkdir(parents=True)
    (folder / "left-by-a-killed-daemon.jsonl").write_text("")
    with mounts(tmp_path) as m:
        m.read_only(tmp_path / "state")
        got = outcomes_dir(str(folder))
        assert got != str(folder) and os.path.isdir(got)
        (Path(got) / "probe").write_text("")  # the agent can create its file there
    assert outcomes_dir(str(folder)) == str(folder)  # writable again: the daemon's own, cleared
    assert list(folder.iterdir()) == []
