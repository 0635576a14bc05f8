"""The git operations per-task isolation is made of: refs, worktrees, commits and merges.

Merges into a mission's branch never touch a working tree: ``git merge-tree --write-tree`` (git ≥ 2.38) computes
the merged tree in the object database, ``git commit-tree`` makes the merge commit and ``git update-ref`` moves
the branch only if it still points where it pointed (compare-and-swap). So a ``kill -9`` at any point leaves
either the old branch or the new one, never a half-merged checkout or a stale index lock in the user's tree.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from polpo.tools.fileio import reader
from polpo.tools.output import ToolError
from polpo.vcs.git import GitError, git

__all__ = [
    "Merge",
    "add_worktree",
    "branch_exists",
    "branches",
    "clear_stale_locks",
    "commit_all",
    "conflicted_files",
    "delete_branch",
    "exclude_pathspecs",
    "files_with_markers",
    "head",
    "is_ancestor",
    "list_worktrees",
    "merge_in_progress",
    "merge_into",
    "remove_worktree",
    "rev",
    "root_commit",
    "start_merge",
    "update_ref",
]

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # the SHA-1 of git's empty tree


async def rev(repo: Path, ref: str) -> str | None:
    """The commit ``ref`` names, or None."""
    r = await git(repo, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}", ok=(0, 1, 128))
    return r.out.strip() or None if r.ok else None


async def head(repo: Path) -> str | None:
    return await rev(repo, "HEAD")


async def root_commit(repo: Path, message: str) -> str:
    """A commit of the empty tree, for a repository with no commit yet (nothing is checked out or moved)."""
    return (await git(repo, "commit-tree", EMPTY_TREE, "-m", message)).out.strip()


async def update_ref(repo: Path, ref: str, new: str, old: str | None = None) -> None:
    """Point ``ref`` at ``new``; with ``old``, only if it still points at ``old`` ("" = must not exist)."""
    await git(repo, "update-ref", "-m", "polpo", ref, new, *([] if old is None else [old]))


async def branch_exists(repo: Path, branch: str) -> bool:
    r = await git(repo, "show-ref", "--verify", "-q", f"refs/heads/{branch}", ok=(0, 1))
    return r.ok


async def delete_branch(repo: Path, branch: str) -> None:
    await git(repo, "update-ref", "-d", f"refs/heads/{branch}", ok=(0, 1))


async def is_ancestor(repo: Path, a: str, b: str) -> bool:
    return (await git(repo, "merge-base", "--is-ancestor", a, b, ok=(0, 1))).ok


async def add_worktree(repo: Path, path: Path, branch: str, start: str | None) -> None:
    """Check ``branch`` out in a new worktree at ``path``; ``start`` given: the branch is created there."""
    await anyio.Path(path.parent).mkdir(parents=True, exist_ok=True)
    if start is None:
        await git(repo, "worktree", "add", "--quiet", str(path), branch)
    else:
        await git(repo, "worktree", "add", "--quiet", "-b", branch, str(path), start)


async def remove_worktree(repo: Path, path: Path) -> None:
    """Remove the worktree at ``path`` whatever it holds (its branch stays); tolerant of a half-made one."""
    with contextlib.suppress(GitError):
        await git(repo, "worktree", "remove", "--force", "--force", str(path), ok=(0, 128))
    if await anyio.Path(path).exists():
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(path, ignore_errors=True))
    await git(repo, "worktree", "prune", ok=(0, 128))


async def list_worktrees(repo: Path) -> list[tuple[Path, str | None]]:
    """(path, branch or None) of every worktree of ``repo``, the main one included."""
    r = await git(repo, "worktree", "list", "--porcelain", "-z")
    out: list[tuple[Path, str | None]] = []
    path: Path | None = None
    branch: str | None = None
    for item in r.out.split("\0"):
        if item.startswith("worktree "):
            path, branch = Path(item[len("worktree "):]), None
        elif item.startswith("branch refs/heads/"):
            branch = item[len("branch refs/heads/"):]
        elif item == "" and path is not None:
            out.append((path, branch))
            path = None
    return out


def exclude_pathspecs(patterns: Sequence[str]) -> list[str]:
    """``git add`` pathspecs leaving out an agent's own files (``.aider*``: at any depth, and their content)."""
    specs = []
    for p in patterns:
        p = p.strip("/")
        base = p if "/" in p else f"**/{p}"
        specs += [f":(exclude,glob){base}", f":(exclude,glob){base}/**"]
    return specs


async def merge_in_progress(worktree: Path) -> bool:
    return (await git(worktree, "rev-parse", "-q", "--verify", "MERGE_HEAD", ok=(0, 1))).ok


async def conflicted_files(worktree: Path) -> list[str]:
    r = await git(worktree, "diff", "--name-only", "-z", "--diff-filter=U")
    return [p for p in r.out.split("\0") if p]


async def commit_all(worktree: Path, message: str, exclude: Sequence[str] = ()) -> str | None:
    """Stage everything (ignore rules and ``exclude`` honoured) and commit; the new commit, or None if nothing
    changed. A merge in progress is concluded by this commit."""
    await git(worktree, "add", "-A", "--", ".", *exclude_pathspecs(exclude))
    staged = not (await git(worktree, "diff", "--cached", "--quiet", ok=(0, 1))).ok
    if not staged and not await merge_in_progress(worktree):
        return None
    await git(worktree, "commit", "-q", "--no-verify", "--allow-empty", "-m", message)
    return await head(worktree)


@dataclass(frozen=True)
class Merge:
    """What merging a task's branch into the mission's branch did."""

    merged: bool  # the mission branch now contains the task's work (also: it already did)
    commit: str | None = None  # the merge commit made, if one was
    conflicts: list[str] = field(default_factory=list)  # files both sides changed incompatibly
    messages: str = ""  # git's CONFLICT lines, for the agent's feedback


async def merge_into(repo: Path, target_branch: str, source: str, message: str) -> Merge:
    """Merge commit ``source`` into ``target_branch`` without a checkout (see the module docstring)."""
    target = await rev(repo, f"refs/heads/{target_branch}")
    if target is None:
        raise GitError(("merge-tree",), None, f"branch {target_branch} does not exist")
    if await is_ancestor(repo, source, target):
        return Merge(True)
    r = await git(repo, "merge-tree", "--write-tree", "--name-only", "--messages", target, source, ok=(0, 1))
    lines = r.out.split("\n")
    tree = lines[0].strip()
    if r.code == 1:
        conflicts, rest = [], lines[1:]
        while rest and rest[0]:
            conflicts.append(rest.pop(0))
        messages = "\n".join(x for x in rest if x.startswith("CONFLICT"))
        return Merge(False, conflicts=list(dict.fromkeys(conflicts)), messages=messages)
    commit = (await git(repo, "commit-tree", tree, "-p", target, "-p", source, "-m", message)).out.strip()
    await update_ref(repo, f"refs/heads/{target_branch}", commit, target)
    return Merge(True, commit)


async def start_merge(worktree: Path, ref: str, message: str) -> list[str]:
    """Merge ``ref`` into the worktree's branch, leaving conflict markers for the agent to resolve; the files in
    conflict (empty when the merge went through cleanly and was committed)."""
    r = await git(worktree, "merge", "--no-ff", "-m", message, ref, ok=(0, 1))
    if r.ok:
        return []
    files = await conflicted_files(worktree)
    if not files:  # failed for another reason (e.g. local changes in the way): say so
        raise GitError(("merge",), r, f"git merge failed: {(r.err or r.out).strip()[-300:]}")
    return files


async def branches(repo: Path, prefix: str) -> list[str]:
    """Branch names starting with ``prefix``."""
    r = await git(repo, "for-each-ref", "--format=%(refname:strip=2)", f"refs/heads/{prefix}")
    return [b for b in r.out.splitlines() if b]


_MARKER = re.compile(rb"^(<{7} |>{7} |={7}$)", re.M)


async def files_with_markers(worktree: Path, files: Sequence[str]) -> list[str]:
    """Those of ``files`` that still hold conflict markers."""
    def scan() -> list[str]:
        found = []
        for f in files:
            try:  # a regular file only, opened without blocking: a FIFO left under its name must not hold the thread
                with reader(worktree / f) as fh:
                    if _MARKER.search(fh.read()):
                        found.append(f)
            except (OSError, ToolError):
                continue
        return found

    return await anyio.to_thread.run_sync(scan)


async def clear_stale_locks(repo: Path, worktrees_under: Path, ref_folder: str) -> None:
    """Lock files a killed git left: in the admin folders of the worktrees under ``worktrees_under`` and under
    ``refs/heads/polpo/<ref_folder>`` and ``refs/polpo/<ref_folder>`` (no other program writes there)."""
    r = await git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir", ok=(0, 128))
    if not r.ok:
        return
    common = Path(r.out.strip())

    def clear() -> None:
        places = [common / "refs" / "heads" / "polpo" / ref_folder, common / "refs" / "polpo" / ref_folder]
        for admin in (common / "worktrees").glob("*") if (common / "worktrees").is_dir() else []:
            try:
                if Path((admin / "gitdir").read_text().strip()).is_relative_to(worktrees_under):
                    places.append(admin)
            except OSError:
                continue
        for place in places:
            for lock in place.rglob("*.lock") if place.is_dir() else []:
                lock.unlink(missing_ok=True)

    await anyio.to_thread.run_sync(clear)
