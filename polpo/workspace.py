"""Snapshot a workspace folder and diff two snapshots: which files an agent run created, modified, deleted.

The scan is the fallback of :mod:`polpo.changes` (used where inotify is not available); :func:`skip_dir` is the
rule both use for folders never looked into.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SKIP_DIRS", "FileChanges", "Snapshot", "diff", "is_virtualenv", "skip_dir", "snapshot"]

#: Directory names never descended into (at any depth): version control, dependencies, tool caches, polpo's state.
SKIP_DIRS: frozenset[str] = frozenset({
    ".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".polpo", ".tox", ".nox", ".mypy_cache",
    ".pytest_cache", ".ruff_cache"})


def is_virtualenv(path: str) -> bool:
    """A Python virtualenv (whatever its name): it holds ``pyvenv.cfg``."""
    return os.path.isfile(os.path.join(path, "pyvenv.cfg"))


def skip_dir(name: str, path: str) -> bool:
    """Whether the folder ``name`` at ``path`` is never scanned or watched."""
    return name in SKIP_DIRS or is_virtualenv(path)

#: relative posix path → (size in bytes, mtime in ns)
Snapshot = dict[str, tuple[int, int]]


@dataclass(frozen=True)
class FileChanges:
    created: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.created or self.modified or self.deleted)

    def as_dict(self) -> dict[str, list[str]]:
        return {"created": list(self.created), "modified": list(self.modified), "deleted": list(self.deleted)}


def snapshot(root: Path, *, max_entries: int = 50_000, exclude: frozenset[str] = frozenset()) -> Snapshot:
    """Regular files under ``root`` (symlinks not followed, :data:`SKIP_DIRS` skipped), at most ``max_entries``.

    A missing or unreadable ``root`` gives an empty snapshot; files or folders that vanish during the walk are
    skipped. The walk is in sorted order, so hitting ``max_entries`` always keeps the same files. ``exclude``:
    absolute folder paths not entered either (polpo's own state when it lies inside the workspace).
    """
    result: Snapshot = {}
    if max_entries <= 0:
        return result
    stack: list[tuple[str, str]] = [(os.fspath(root), "")]
    while stack:
        path, rel = stack.pop()
        try:
            with os.scandir(path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        subdirs: list[tuple[str, str]] = []
        for entry in entries:
            name = rel + entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if not skip_dir(entry.name, entry.path) and entry.path not in exclude:
                    subdirs.append((entry.path, name + "/"))
            elif stat.S_ISREG(st.st_mode):
                result[name] = (st.st_size, st.st_mtime_ns)
                if len(result) >= max_entries:
                    return result
        stack.extend(reversed(subdirs))
    return result


def diff(before: Snapshot, after: Snapshot) -> FileChanges:
    """Files created, modified (size or mtime changed) and deleted between two snapshots, each list sorted."""
    created = sorted(p for p in after if p not in before)
    deleted = sorted(p for p in before if p not in after)
    modified = sorted(p for p, meta in after.items() if p in before and before[p] != meta)
    return FileChanges(created=created, modified=modified, deleted=deleted)
