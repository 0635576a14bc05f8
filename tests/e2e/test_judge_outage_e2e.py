"""The acceptance run of issue 13, end to end: a daemon, a command agent, the CLI, SQLite, a judge over real HTTP.

With the judge's port dead the agent runs once and the task waits on hold (``assessment:error``); once the
endpoint is up, ``polpo retry TASK`` passes it without running the agent again, and ``polpo show TASK`` shows the
per-dimension votes with the dropped outlier marked and why.
"""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import pytest

from polpo.config import load_config
from tests.support.daemon import mission_json, run_cli, running_daemon, shell_task, submit, write_config
from tests.support.fake_llm import FakeLLM
from tests.support.judges import ScriptedJudge

pytestmark = pytest.mark.anyio
KEY_ENV = "POLPO_E2E_OUTAGE_KEY"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_dead_judge_then_polpo_retry_then_polpo_show(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-e2e")
    port = free_port()
    cfg = load_config(write_config(tmp_path, extra=f"""
[judge]
models = ["openai/a", "openai/b", "openai/c"]
api_base = "http://127.0.0.1:{port}/v1"
api_key_env = "{KEY_ENV}"
outage_retries = 0
[llm]
max_retries = 0
"""))
    task = shell_task("greet", "echo run >> runs.log; echo hello > out.txt", expectations=[
        {"type": "file_exists", "path": "out.txt"},
        {"type": "llm_review", "criteria": "out.txt greets the user", "threshold": 3.5,
         "dimensions": [{"name": "greeting", "weight": 1.0}]}])
    config = str(cfg.source)
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "greet.json", mission_json(task))
        err = await w.wait_event("assessment:error", task_id="greet:1")
        assert err.data["retryable"] is True and "connection" in err.data["reason"]
        status = await anyio.to_thread.run_sync(lambda: run_cli("status", "--config", config))
        assert "on hold: judge" in status.stdout and "polpo retry greet:1" in status.stdout  # listed first
        held = await anyio.to_thread.run_sync(lambda: run_cli("show", "greet:1", "--config", config))
        # the failed try's reviewers are shown under its check (their traces are kept apart from a verdict's)
        _, _, after = held.stdout.partition("[ERROR] llm_review out.txt greets the user:")
        assert after and "the reviewers of this try:" in after, held.stdout
        tried = after.split("the reviewers of this try:", 1)[1].splitlines()[1:4]
        assert [line.split(":", 1)[0].strip() for line in tried] == [
            "reviewer 0 (openai/a)", "reviewer 1 (openai/b)", "reviewer 2 (openai/c)"], held.stdout
        assert all(": failed:" in line for line in tried), held.stdout
        scores = {"a": 2.0, "b": 4.0, "c": 5.0}
        with FakeLLM(models=("a", "b", "c"), port=port) as srv:
            srv.responder = ScriptedJudge(score_for=lambda r: scores[str(r["model"]).split("/")[-1]])
            retried = await anyio.to_thread.run_sync(lambda: run_cli("retry", "greet:1", "--config", config))
            assert retried.returncode == 0 and "agent does not run again" in retried.stdout, retried.stderr
            done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    workspace = cfg.state_dir / "workspaces" / "greet"
    assert (workspace / "runs.log").read_text().splitlines() == ["run"]  # the agent ran once
    assert not w.of("task:fix") and not w.of("task:retry")
    shown = run_cli("show", "greet:1", "--config", config).stdout
    assert "[pass] llm_review out.txt greets the user: Score 4.50/5 (threshold 3.5)" in shown, shown
    assert ("greeting: 4.50/5 (weight 1); votes: r0 2 DROPPED: 2 from the median 4 (more than 1.5) · r1 4 · r2 5"
            in shown), shown
    assert "why, from reviewer 1 who voted 4: greeting looks ok" in shown
    assert "panel: stable_pass" not in shown  # the dropped 2 is a failing run: flaky, said so
    assert "panel: flaky" in shown and "judge calls: 0 cache hit(s)" in shown
    assert "verdict: passed — 2/2 checks passed" in shown
    assert "reviewer 0 (openai/a): score 2.00 via json_text" in shown
    assert "reviewer 3" not in shown  # the failed try's traces are kept apart, not listed with this review
