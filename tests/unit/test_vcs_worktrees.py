"""polpo.vcs on real repositories: worktrees, commits leaving agents' files out, merges without a checkout."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from polpo.vcs import worktrees as wt
from polpo.vcs.git import GitError, git, top_level

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    _git(r, "init", "-q", "-b", "main")
    (r / "shared.txt").write_text("base\n")
    (r / ".gitignore").write_text("*.log\n")
    _git(r, "add", "-A")
    _git(r, "commit", "-qm", "base")
    return r


async def test_top_level_is_only_the_repository_root(repo: Path) -> None:
    (repo / "sub").mkdir()
    assert top_level(repo) and not top_level(repo / "sub")


async def test_commit_all_honours_ignore_rules_and_leaves_agent_files_out(repo: Path, tmp_path: Path) -> None:
    path = tmp_path / "wts" / "t1"
    await wt.add_worktree(repo, path, "polpo/m/1-t", "main")
    (path / "work.py").write_text("x = 1\n")
    (path / "run.log").write_text("ignored by .gitignore\n")
    (path / ".aider.chat.history.md").write_text("aider's\n")
    (path / "sub").mkdir()
    (path / "sub" / ".aider.input.history").write_text("aider's\n")
    commit = await wt.commit_all(path, "Task one\n\npolpo task m:1", [".aider*"])
    assert commit is not None
    assert _git(repo, "show", "--name-only", "--format=%s", "polpo/m/1-t").split() == ["Task", "one", "work.py"]
    assert await wt.commit_all(path, "nothing", [".aider*"]) is None  # nothing left to commit
    assert (repo / "work.py").exists() is False  # the user's tree is untouched
    assert _git(repo, "status", "--porcelain") == ""


async def test_merge_into_without_a_checkout_then_a_conflict(repo: Path, tmp_path: Path) -> None:
    await wt.update_ref(repo, "refs/heads/polpo/m/result", await wt.head(repo) or "", "")
    a, b = tmp_path / "wts" / "a", tmp_path / "wts" / "b"
    await wt.add_worktree(repo, a, "polpo/m/1-a", "main")
    await wt.add_worktree(repo, b, "polpo/m/2-b", "main")
    (a / "shared.txt").write_text("from a\n")
    (b / "shared.txt").write_text("from b\n")
    ta = await wt.commit_all(a, "a", ())
    tb = await wt.commit_all(b, "b", ())
    assert ta and tb
    first = await wt.merge_into(repo, "polpo/m/result", ta, "merge a")
    assert first.merged and first.commit is not None
    assert _git(repo, "show", "polpo/m/result:shared.txt") == "from a\n"
    assert (await wt.merge_into(repo, "polpo/m/result", ta, "again")).commit is None  # already in: nothing to do
    second = await wt.merge_into(repo, "polpo/m/result", tb, "merge b")
    assert not second.merged and second.conflicts == ["shared.txt"]
    assert "CONFLICT (content): Merge conflict in shared.txt" in second.messages
    assert await wt.rev(repo, "polpo/m/result") == first.commit  # unchanged by the failed merge
    # the agent's side: the result branch merged into its worktree, markers left to resolve
    files = await wt.start_merge(b, "polpo/m/result", "merge result into b")
    assert files == ["shared.txt"] and await wt.merge_in_progress(b)
    assert "<<<<<<< HEAD" in (b / "shared.txt").read_text()
    (b / "shared.txt").write_text("from a\nfrom b\n")
    resolved = await wt.commit_all(b, "b resolved", ())
    assert resolved and not await wt.merge_in_progress(b)
    third = await wt.merge_into(repo, "polpo/m/result", resolved, "merge b")
    assert third.merged
    assert _git(repo, "show", "polpo/m/result:shared.txt") == "from a\nfrom b\n"
    assert _git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"  # HEAD never moved


async def test_an_empty_repository_gets_a_root_commit_and_refs_are_compare_and_swap(tmp_path: Path) -> None:
    r = tmp_path / "empty"
    r.mkdir()
    _git(r, "init", "-q")
    assert await wt.head(r) is None
    root = await wt.root_commit(r, "polpo: empty base")
    await wt.update_ref(r, "refs/polpo/m/base", root, "")
    with pytest.raises(GitError):
        await wt.update_ref(r, "refs/polpo/m/base", root, "")  # must not exist: refused


async def test_remove_worktree_tolerates_a_half_made_one(repo: Path, tmp_path: Path) -> None:
    path = tmp_path / "wts" / "t"
    await wt.add_worktree(repo, path, "polpo/m/1-t", "main")
    (path / ".git").unlink()  # as if git was killed while making it
    await wt.remove_worktree(repo, path)
    assert not path.exists()
    assert [p for p, _ in await wt.list_worktrees(repo)] == [repo]
    assert await wt.branch_exists(repo, "polpo/m/1-t")
    r = await git(repo, "branch", "--list", "polpo/*")
    assert r.out.split() == ["polpo/m/1-t"]
