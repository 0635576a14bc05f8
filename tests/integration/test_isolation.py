"""Tasks at the same time in one git repository (a real daemon, real git, real command agents).

With ``settings.isolation = "worktree"`` each task works in its own worktree and reports only its own file, and
the mission ends with a branch holding every task's commit; in a shared workspace the same overlap is reported as
not attributed instead of guessed. A merge conflict goes back to the agent as a fix. The two tasks meet at a
barrier (each waits until both have started), so they provably overlap without any timing assumption.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from polpo.changes.tracker import SHARED_NOTE
from polpo.config import Config, load_config
from tests.support.daemon import (
    DEFAULT_AGENTS,
    mission_json,
    run_cli,
    running_daemon,
    shell_task,
    submit,
    write_config,
)
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, text, tool_call

pytestmark = pytest.mark.anyio


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    (r / "README.md").write_text("a repository\n")
    (r / "shared.txt").write_text("base\n")
    git(r, "add", "-A")
    git(r, "commit", "-qm", "init")
    return r


def config(tmp_path: Path, repo: Path) -> Config:
    return load_config(write_config(tmp_path, extra=f'[security]\nworkspace_roots = ["{repo}"]\n'))


def barrier(folder: Path) -> str:
    """Shell: note this task started, wait (≤ 30 s) until two have; then $SEEN is how many had."""
    folder.mkdir(exist_ok=True)
    return (f'touch "{folder}/$POLPO_TASK_ID"; n=0; '
            f'while [ "$(ls "{folder}" | wc -l)" -lt 2 ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done; '
            f'SEEN=$(ls "{folder}" | wc -l | tr -d " "); ')


def attempts(cfg: Config, task_id: str) -> list[dict[str, Any]]:
    out = run_cli("show", task_id, "--json", "--config", str(cfg.source))
    assert out.returncode == 0, out.stderr
    shown: list[dict[str, Any]] = json.loads(out.stdout)["attempts"]
    return shown


async def cleaned_up(repo: Path, folder: Path) -> None:
    """Wait for the end-of-mission clean-up (it runs after mission:completed); ``folder``: the mission's
    folder of worktrees, removed last."""
    with anyio.fail_after(20):
        while folder.exists() or len(git(repo, "worktree", "list").splitlines()) > 1:
            await anyio.sleep(0.05)


async def test_two_tasks_at_once_in_worktrees_report_their_own_file_and_end_on_one_branch(
        tmp_path: Path, repo: Path) -> None:
    cfg = config(tmp_path, repo)
    wait = barrier(tmp_path / "barrier")
    doc = mission_json(
        shell_task("Write a", wait + 'echo "$SEEN" > a.txt', expectations=[{"type": "file_exists", "path": "a.txt"}]),
        shell_task("Write b", wait + 'echo "$SEEN" > b.txt', expectations=[{"type": "file_exists", "path": "b.txt"}]),
        name="iso", workspace=str(repo), settings={"isolation": "worktree"})
    head = git(repo, "rev-parse", "HEAD")
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "iso.json", doc)
        done = await w.wait_event("mission:completed")
        await cleaned_up(repo, cfg.state_dir / "worktrees" / "iso")
    assert done.data["outcome"] == "completed"
    for tid, name in (("iso:1", "a.txt"), ("iso:2", "b.txt")):
        [a] = attempts(cfg, tid)
        assert a["files"] == {"created": [name], "modified": [], "deleted": [], "attributed": True,
                              "tracking": "watch"}
    worktrees = {e.task_id: e.data for e in w.of("task:worktree")}
    assert {d["branch"] for d in worktrees.values()} == {"polpo/iso/1-Write-a", "polpo/iso/2-Write-b"}
    assert all(d["start"] == head.strip() for d in worktrees.values())
    # both ran at once (each saw the other at the barrier), each in its own worktree, and both landed
    assert git(repo, "show", "polpo/iso/result:a.txt") == "2\n" and git(repo, "show", "polpo/iso/result:b.txt") == "2\n"
    subjects = git(repo, "log", "--format=%s", "polpo/iso/result").splitlines()
    assert {"Write a", "Write b"} <= set(subjects)
    assert sum(s.startswith("polpo: merge task iso:") for s in subjects) == 2
    assert done.data["report"]["branch"] == {"name": "polpo/iso/result", "base": head.strip(),
                                             "repository": str(repo), "tasks": ["iso:1", "iso:2"]}
    # the user's checkout is untouched; only the result branch is left
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "status", "--porcelain") == ""
    assert not (repo / "a.txt").exists()
    assert git(repo, "branch", "--list", "polpo/*").split() == ["polpo/iso/result"]
    shown = run_cli("show", "iso", "--config", str(cfg.source)).stdout
    assert "result on branch polpo/iso/result" in shown


async def test_two_tasks_at_once_in_a_shared_workspace_are_not_attributed(tmp_path: Path, repo: Path) -> None:
    cfg = config(tmp_path, repo)
    wait = barrier(tmp_path / "barrier")
    doc = mission_json(shell_task("Write a", wait + "echo a > a.txt"), shell_task("Write b", wait + "echo b > b.txt"),
                       name="shared", workspace=str(repo))
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "shared.json", doc)
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed" and "branch" not in done.data["report"]
    for tid, other in (("shared:1", "shared:2"), ("shared:2", "shared:1")):
        [a] = attempts(cfg, tid)
        assert a["files"] == {"created": [], "modified": [], "deleted": [], "attributed": False, "tracking": "watch",
                              "note": f"{SHARED_NOTE} (task {other} ran in it meanwhile)"}
    assert {e.data["filesNote"] for e in w.of("agent:finished")} == {
        f"{SHARED_NOTE} (task shared:2 ran in it meanwhile)", f"{SHARED_NOTE} (task shared:1 ran in it meanwhile)"}
    assert (repo / "a.txt").read_text() == "a\n" and (repo / "b.txt").read_text() == "b\n"
    show = run_cli("show", "shared:1", "--config", str(cfg.source)).stdout
    assert f"files: {SHARED_NOTE}" in show


async def test_a_merge_conflict_goes_back_to_the_agent_as_a_fix(tmp_path: Path, repo: Path) -> None:
    cfg = config(tmp_path, repo)
    wait = barrier(tmp_path / "barrier")
    script = ('if [ "$POLPO_ATTEMPT_KIND" = fix ]; then '
              "grep -q '^<<<<<<<' shared.txt && printf 'both\\n' > shared.txt; exit 0; fi; "
              + wait + 'echo "$POLPO_TASK_TITLE" > shared.txt')
    tasks = [shell_task(t, script, maxFixAttempts=1, maxRetries=0) for t in ("A", "B")]
    (repo / "README.md").write_text("edited, not committed\n")  # the worktrees start from what is committed
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "clash.json", mission_json(*tasks, name="clash", workspace=str(repo),
                                               settings={"isolation": "worktree"}))
        done = await w.wait_event("mission:completed")
        await cleaned_up(repo, cfg.state_dir / "worktrees" / "clash")
    assert done.data["outcome"] == "completed"
    [conflict] = w.of("task:merge:conflict")
    assert conflict.data["files"] == ["shared.txt"] and conflict.data["into"] == "polpo/clash/result"
    fixed = attempts(cfg, conflict.task_id or "")
    assert [a["kind"] for a in fixed] == ["initial", "fix"]
    failed = fixed[0]["assessments"][-1]
    assert "merge" not in [c["type"] for c in failed["checks"]]  # the checks passed; the merge did not
    [fix_event] = w.of("task:fix", task_id=conflict.task_id)
    assert fix_event.data["check"] == "merge merge into the mission branch"
    assert "conflicts with the mission's branch in shared.txt" in fixed[1]["prompt"]
    assert fixed[1]["files"]["modified"] == ["shared.txt"]
    assert git(repo, "show", "polpo/clash/result:shared.txt") == "both\n"
    assert len(w.of("task:merged")) == 2
    notes = [e.data.get("note") for e in w.of("task:worktree")]
    assert sorted(notes, key=str) == [None, "the repository has uncommitted changes: the tasks' worktrees do not "
                                            "have them"]
    assert git(repo, "show", "polpo/clash/result:README.md") == "a repository\n"
    assert (repo / "README.md").read_text() == "edited, not committed\n"


async def test_an_llm_agents_own_writes_stay_attributed_in_a_shared_workspace(
        tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model writes llm.txt, then answers only once the command task has started (it waits for llm.txt):
    the two overlap for sure. The LLM agent's tool log is certain; the command agent's files are not."""
    monkeypatch.setenv("POLPO_ISO_TEST_KEY", "sk-iso-test")
    started = tmp_path / "barrier"
    started.mkdir()

    def reply(req: RecordedRequest) -> Reply:
        if req["messages"][-1]["role"] != "tool":
            return tool_call("write_file", {"path": "llm.txt", "content": "from the model\n"})
        deadline = time.monotonic() + 30
        while not (started / "mixed:2").exists() and time.monotonic() < deadline:
            time.sleep(0.02)  # the server's thread waits for the other task; no assertion depends on time
        return text("llm.txt written")

    with FakeLLM() as srv:
        srv.responder = reply
        cfg = load_config(write_config(tmp_path, agents=DEFAULT_AGENTS + f"""
[agents.coder]
type = "llm"
model = "openai/fake-model"
api_base = "{srv.base_url}"
api_key_env = "POLPO_ISO_TEST_KEY"
""", extra=f'[security]\nworkspace_roots = ["{repo}"]\n[llm]\nmax_retries = 0\n'))
        tasks = [{"title": "Model writes", "description": "Write llm.txt.", "assignTo": "coder"},
                 shell_task("Command writes", f'touch "{started}/$POLPO_TASK_ID"; '
                                              "while [ ! -f llm.txt ]; do sleep 0.05; done; echo b > b.txt")]
        async with running_daemon(cfg) as (_, w):
            submit(cfg, "mixed.json", mission_json(*tasks, name="mixed", workspace=str(repo)))
            done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    [model] = attempts(cfg, "mixed:1")
    assert model["files"] == {"created": ["llm.txt"], "modified": [], "deleted": [], "attributed": True,
                              "tracking": "tool-log"}
    [command] = attempts(cfg, "mixed:2")
    assert (command["files"]["created"], command["files"]["attributed"]) == ([], False)
    assert command["files"]["note"] == f"{SHARED_NOTE} (task mixed:1 ran in it meanwhile)"
