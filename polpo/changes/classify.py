"""From paths seen changing to created / modified / deleted files.

In a git repository the paths seen are handed to ``git status`` (just those paths, so its cost does not grow with
the repository): ignore rules are honoured, and a file rewritten with the same content does not count. Elsewhere
each path is looked at: present now and not before → created, present before and now → modified, gone →
deleted. (A file replaced by a rename counts as created outside git: inotify cannot tell a replace from a new
file, and nothing was recorded before.) A folder deleted or moved away is listed as ``name/`` outside git; git
names the files it held.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio

from polpo.changes.patterns import ignored
from polpo.changes.watch import Window
from polpo.vcs.git import git
from polpo.workspace import SKIP_DIRS, FileChanges

__all__ = ["PATHSPEC_LIMIT", "GitSnapshot", "git_snapshot", "git_status", "snapshot_changes", "window_changes"]

PATHSPEC_LIMIT = 300
"""Above this many paths, one whole ``git status`` is cheaper than a command line of paths."""

GitSnapshot = dict[str, tuple[str, int, int]]
"""Dirty paths of a repository → (status code, size, mtime ns): the fallback when nothing can be watched."""


async def git_status(root: str | os.PathLike[str], paths: Sequence[str] | None = None) -> dict[str, str]:
    """``git status`` of ``paths`` (None: all) in the repository ``root``: path → two-letter code."""
    args = ["status", "--porcelain=v1", "-z", "-uall", "--no-renames", "--ignore-submodules=all"]
    if paths is not None:
        args += ["--", *(f":(literal){p}" for p in paths)]
    r = await git(Path(root), *args)
    out: dict[str, str] = {}
    for item in r.out.split("\0"):
        if len(item) > 3:
            out[item[3:]] = item[:2]
    return out


def _skipped(path: str) -> bool:
    """In a folder never watched (:data:`polpo.workspace.SKIP_DIRS`): the fallback says what the watch would."""
    return any(part in SKIP_DIRS for part in path.split("/")[:-1])


def _under(path: str, folders: Sequence[str]) -> bool:
    return any(path.startswith(f + "/") for f in folders)


async def window_changes(root: str, window: Window, ignore: Sequence[str], *, repo: bool) -> FileChanges:
    """What the paths of ``window`` amount to (``repo``: ``root`` is a git working tree's top folder)."""
    seen = {p: existed for p, existed in window.paths.items() if not ignored(p, ignore)}
    gone = sorted(d for d in window.dirs_gone if not ignored(d, ignore))
    if not seen and not gone:
        return FileChanges()
    if repo:
        specs = [*seen, *gone]
        status = await git_status(root, specs if len(specs) <= PATHSPEC_LIMIT else None)
        return _from_status(status, seen, gone, ignore)
    return await anyio.to_thread.run_sync(_from_disk, root, seen, gone)


def _from_status(status: Mapping[str, str], seen: Mapping[str, bool], gone: Sequence[str],
                 ignore: Sequence[str]) -> FileChanges:
    created: list[str] = []
    modified: list[str] = []
    deleted: list[str] = []
    for path, code in status.items():
        if path not in seen and not _under(path, gone):
            continue
        if ignored(path, ignore):
            continue
        if "D" in code:
            deleted.append(path)
        elif code == "??" or code[0] == "A":
            (created if not seen.get(path, True) or code[0] == "A" else modified).append(path)
        else:
            modified.append(path)
    return FileChanges(sorted(created), sorted(modified), sorted(deleted))


def _from_disk(root: str, seen: Mapping[str, bool], gone: Sequence[str]) -> FileChanges:
    created: list[str] = []
    modified: list[str] = []
    deleted: list[str] = []
    for path, existed in seen.items():
        here = os.path.lexists(os.path.join(root, path)) and not os.path.isdir(os.path.join(root, path))
        if here:
            (modified if existed else created).append(path)
        elif existed:
            deleted.append(path)
    deleted += [f"{d}/" for d in gone if not os.path.lexists(os.path.join(root, d))]
    return FileChanges(sorted(created), sorted(modified), sorted(deleted))


async def git_snapshot(root: str | os.PathLike[str]) -> GitSnapshot:
    """Every dirty path with its size and mtime (a whole ``git status``: the slow path)."""
    status = await git_status(root)

    def stat_all() -> GitSnapshot:
        out: GitSnapshot = {}
        for path, code in status.items():
            try:
                st = os.lstat(os.path.join(root, path))
                out[path] = (code, st.st_size, st.st_mtime_ns)
            except OSError:
                out[path] = (code, -1, -1)
        return out

    return await anyio.to_thread.run_sync(stat_all)


def snapshot_changes(before: GitSnapshot, after: GitSnapshot, ignore: Sequence[str]) -> FileChanges:
    """Paths whose status or stat differ between two :func:`git_snapshot` (a path clean again counts as changed)."""
    created: list[str] = []
    modified: list[str] = []
    deleted: list[str] = []
    for path in sorted({*before, *after}):
        if before.get(path) == after.get(path) or ignored(path, ignore) or _skipped(path):
            continue
        now = after.get(path)
        if now is None:
            modified.append(path)  # dirty before, clean now: the attempt changed it back
        elif "D" in now[0]:
            deleted.append(path)
        elif now[0] == "??" and path not in before:
            created.append(path)
        else:
            modified.append(path)
    return FileChanges(created, modified, deleted)
