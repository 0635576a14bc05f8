"""kill -9 a daemon while a task works in its git worktree: the restart adopts the worktree (clearing the lock a
killed git left), the task finishes and lands, and a finished mission's leftover worktree is cleaned up."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.daemon import (
    daemon_process,
    mission_json,
    read_events,
    shell_task,
    wait_events,
    write_config,
)

pytestmark = pytest.mark.slow


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout


def test_sigkill_mid_task_then_restart_reuses_the_worktree_and_lands(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("r\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    config = write_config(tmp_path, extra=f'[security]\nworkspace_roots = ["{repo}"]\n')
    state = tmp_path / "state"
    go = tmp_path / "go"
    work = (f'echo "$POLPO_ATTEMPT" >> attempts.txt; echo $$ > "{tmp_path}/agent.pid"; '
            f'while [ ! -f "{go}" ]; do sleep 0.05; done; echo done > out.txt')
    (tmp_path / "missions" / "crash.json").write_text(mission_json(
        shell_task("Slow", work, expectations=[{"type": "file_exists", "path": "out.txt"}]),
        name="crash", workspace=str(repo), settings={"isolation": "worktree"}))
    worktree = state / "worktrees" / "crash" / "1-Slow"
    with daemon_process(config) as proc:
        wait_events(state, lambda _: (tmp_path / "agent.pid").exists())
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    assert (worktree / "attempts.txt").read_text() == "1\n"
    # what a git killed mid-commit leaves: the worktree's index lock (it would make every later commit fail)
    admin = Path(git(worktree, "rev-parse", "--absolute-git-dir").strip())
    (admin / "index.lock").write_text("")
    # and a mission that ended while the daemon was down, its clean-up never done: a worktree and a merged branch
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "update-ref", "refs/heads/polpo/old/result", base)
    git(repo, "worktree", "add", "-q", "-b", "polpo/old/1-x", str(state / "worktrees" / "old" / "1-x"), base)
    (state / "worktrees" / "old" / "mission.json").write_text(json.dumps(
        {"missionId": "old", "repository": str(repo), "slug": "old", "base": base}))

    go.write_text("")
    with daemon_process(config):
        evs = wait_events(state, lambda evs: any(e["event"] == "mission:completed" for e in evs))
        wait_events(state, lambda _: not (state / "worktrees" / "crash").exists()
                    and len(git(repo, "worktree", "list").splitlines()) == 1)
    done = next(e for e in evs if e["event"] == "mission:completed")
    assert done["data"]["outcome"] == "completed"
    # the same worktree ran the task again (made once, adopted after the crash): its first run's file is there
    assert [e["taskId"] for e in read_events(state) if e["event"] == "task:worktree"] == ["crash:1"]
    assert git(repo, "show", "polpo/crash/result:attempts.txt") == "1\n2\n"
    assert git(repo, "show", "polpo/crash/result:out.txt") == "done\n"
    assert not (admin / "index.lock").exists()
    assert git(repo, "branch", "--list", "polpo/*").split() == ["polpo/crash/result", "polpo/old/result"]
    assert not (state / "worktrees" / "old").exists()
    assert git(repo, "status", "--porcelain") == ""
