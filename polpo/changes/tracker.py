"""Each attempt's changed files, fast on big workspaces and attributed only when that is certain.

The runner opens a window when the agent starts and closes it when the agent has exited; the window records what
changed in the attempt's workspace meanwhile (:mod:`.watch`: inotify, a cost that does not grow with the number of
files). Where nothing can be watched (not Linux, the watch limit reached) it falls back to a before/after
``git status`` in a repository, and to a scan elsewhere (:func:`polpo.workspace.snapshot`).

Attribution. A task's whole turn — its agent and its checks — is an *activity* in its workspace. The files seen are
the attempt's only if no other task's activity touched the same folder while the window was open: always true in
a task's own worktree (per-task isolation), true in a shared workspace when tasks did not overlap. Otherwise the
record says ``attributed: false`` with the reason ("shared workspace: changes not attributed") and no files,
rather than a guess — the reviewers then judge the attempt from its output and timeline. An LLM agent's own
tool log (its ``write_file`` / ``edit_file`` calls) is certain in any case: its files are kept, and the record is
complete when the agent ran no shell command.

The record (an attempt's ``files`` JSON) keeps its old keys — ``created``, ``modified``, ``deleted`` — and adds
``attributed``, ``tracking`` (watch | git | scan | tool-log) and, when needed, ``note``. Rows written before these
keys existed read as attributed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from polpo.changes.classify import GitSnapshot, git_snapshot, snapshot_changes, window_changes
from polpo.changes.inotify import InotifyUnavailable
from polpo.changes.patterns import ignored
from polpo.changes.watch import TreeWatch, Window
from polpo.vcs.git import GitError, git, top_level
from polpo.workspace import FileChanges, Snapshot, diff, skip_dir, snapshot

__all__ = ["SHARED_NOTE", "ChangeTracker", "ToolLog", "Tracking", "files_count", "files_record"]

SHARED_NOTE = "shared workspace: changes not attributed"
LINGER = 300.0  # seconds an unused watch is kept (a mission's next task reuses it)
IDLE_WATCHES = 16  # unused watches kept at most (each is an inotify instance: 128 per user by default, shared)
RETRY_WATCH = 60.0  # seconds a folder that could not be watched uses the fallback before watching is tried again


@dataclass(frozen=True)
class ToolLog:
    """Files an LLM agent wrote through its own tools; ``complete`` when it changed nothing any other way."""

    created: tuple[str, ...]
    modified: tuple[str, ...]
    complete: bool


@dataclass(eq=False)
class Tracking:
    """One attempt's window on its workspace."""

    root: Path
    key: str
    ignore: tuple[str, ...]
    repo: bool
    window: Window | None = None
    before: GitSnapshot | Snapshot | None = None
    shared_with: str | None = None
    how: str = "watch"


def files_record(changes: FileChanges, *, how: str, attributed: bool = True, note: str | None = None
                 ) -> dict[str, Any]:
    out: dict[str, Any] = {**changes.as_dict(), "attributed": attributed, "tracking": how}
    if note:
        out["note"] = note
    return out


def files_count(files: dict[str, Any] | None) -> int:
    """How many files an attempt's ``files`` record names."""
    files = files or {}
    return sum(len(files.get(k) or []) for k in ("created", "modified", "deleted"))


def _overlap(a: str, b: str) -> bool:
    return a == b or a.startswith(b + os.sep) or b.startswith(a + os.sep)


@dataclass(eq=False)
class _Activity:
    root: str
    key: str


@dataclass
class ChangeTracker:
    """See the module docstring. ``exclude``: folders never watched nor scanned (polpo's state folder);
    ``monotonic``: the seconds that age idle watches and folders that could not be watched (a test's own)."""

    exclude: Sequence[Path] = ()
    linger: float = LINGER
    monotonic: Callable[[], float] = time.monotonic
    use_watch: bool = True
    watches: dict[str, TreeWatch] = field(default_factory=dict)
    unwatchable: dict[str, tuple[str, float]] = field(default_factory=dict)  # root → (why, when): the fallback
    activities: list[_Activity] = field(default_factory=list)
    open_trackings: set[Tracking] = field(default_factory=set)
    _locks: dict[str, anyio.Lock] = field(default_factory=dict)  # only while a watch starts there

    # -- activities -----------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def activity(self, root: Path, key: str) -> Iterator[None]:
        """A task's turn in ``root`` (agent and checks): any window of another task there stops being certain."""
        act = _Activity(os.fspath(root), key)
        for t in self.open_trackings:
            if t.key != key and t.shared_with is None and _overlap(os.fspath(t.root), act.root):
                t.shared_with = key
        self.activities.append(act)
        try:
            yield
        finally:
            self.activities.remove(act)
            for t in [t for t in self.open_trackings if t.key == key and os.fspath(t.root) == act.root]:
                self._drop(t)  # an attempt that ended without closing its window (cancelled, crashed)

    # -- windows --------------------------------------------------------------------------------------------
    async def open(self, root: Path, key: str, *, ignore: Sequence[str] = ()) -> Tracking:
        """Start recording ``root``'s changes for task ``key``'s attempt."""
        t = Tracking(root, key, tuple(ignore), repo=top_level(root))
        here = os.fspath(root)
        t.shared_with = next((a.key for a in self.activities if a.key != key and _overlap(a.root, here)), None)
        self.open_trackings.add(t)
        try:
            watch = await self._watch(root) if self.use_watch else None
            if watch is not None:
                quick = watch.open_at_once()
                t.window = quick if quick is not None else await anyio.to_thread.run_sync(watch.open)
            elif t.repo:
                t.how, t.before = "git", await git_snapshot(root)
            else:
                t.how, t.before = "scan", await anyio.to_thread.run_sync(self._scan, root)
        except BaseException:
            self.open_trackings.discard(t)
            raise
        return t

    async def close(self, t: Tracking, *, tool_log: ToolLog | None = None) -> dict[str, Any]:
        """Stop recording; the attempt's ``files`` record (see the module docstring)."""
        try:
            changes, lost = await self._changes(t)
        finally:
            self.open_trackings.discard(t)
        why = lost or (f"{SHARED_NOTE} (task {t.shared_with} ran in it meanwhile)" if t.shared_with else None)
        if why is None:
            return files_record(changes, how=t.how)
        if tool_log is not None:
            logged = FileChanges(sorted(tool_log.created), sorted(tool_log.modified), [])
            note = None if tool_log.complete else f"{why}; only the agent's own file-tool writes are attributed"
            return files_record(logged, how="tool-log", attributed=tool_log.complete, note=note)
        return files_record(FileChanges(), how=t.how, attributed=False, note=why)

    async def _changes(self, t: Tracking) -> tuple[FileChanges, str | None]:
        root = os.fspath(t.root)
        if t.window is not None:
            watch = self.watches.get(root)
            w = t.window
            if watch is not None:
                quick = watch.close_at_once(w)
                w = quick if quick is not None else await anyio.to_thread.run_sync(watch.close_window, w)
                watch.last_used = self.monotonic()
            if w.lost:
                return FileChanges(), f"changes not attributed: {w.lost}"
            try:
                return await window_changes(root, w, t.ignore, repo=t.repo), None
            except GitError as exc:
                return FileChanges(), f"changes not attributed: {exc}"
        if t.repo and t.before is not None:
            after = await git_snapshot(t.root)
            return snapshot_changes(t.before, after, t.ignore), None  # type: ignore[arg-type]
        after_scan = await anyio.to_thread.run_sync(self._scan, t.root)
        found = diff(t.before or {}, after_scan)  # type: ignore[arg-type]
        keep = [[p for p in ps if not ignored(p, t.ignore)] for ps in (found.created, found.modified, found.deleted)]
        return FileChanges(*keep), None

    def _drop(self, t: Tracking) -> None:
        self.open_trackings.discard(t)
        watch = self.watches.get(os.fspath(t.root))
        if watch is not None and t.window is not None:
            with watch.lock:
                watch.windows.discard(t.window)

    def _scan(self, root: Path) -> Snapshot:
        return snapshot(root, exclude=frozenset(os.fspath(p) for p in self.exclude))

    # -- watches --------------------------------------------------------------------------------------------
    async def _watch(self, root: Path) -> TreeWatch | None:
        key = os.fspath(root)
        watch = self.watches.get(key)
        if watch is not None and not watch.broken:  # the usual case: no lock needed
            self._forget_idle(keep=key)
            return watch
        if key in self.unwatchable:
            if self.monotonic() - self.unwatchable[key][1] < RETRY_WATCH:
                return None
            del self.unwatchable[key]
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = anyio.Lock()
        try:
            async with lock:
                return await self._start_watch(key, root)
        finally:
            stats = lock.statistics()
            if not stats.locked and not stats.tasks_waiting and self._locks.get(key) is lock:
                del self._locks[key]  # it only serialises starting a watch: none kept per workspace ever seen

    async def _start_watch(self, key: str, root: Path) -> TreeWatch | None:
        """The watch on ``root`` (under its lock): the one another task just started, or a new one; None when
        it cannot be watched (the fallback)."""
        self._forget_idle(keep=key)
        watch = self.watches.get(key)
        if watch is not None and not watch.broken:
            return watch
        if watch is not None:
            watch.close()
        ignored_dirs = await self._ignored_dirs(root) if top_level(root) else frozenset()
        excluded = frozenset(os.fspath(p) for p in self.exclude)

        def skip(rel: str, path: str) -> bool:
            return skip_dir(os.path.basename(rel), path) or path in excluded or rel in ignored_dirs

        try:
            watch = TreeWatch(key, skip)
        except InotifyUnavailable as exc:  # no inotify here, or no instance left: the fallback for a while
            self._unwatchable(key, str(exc))
            return None
        try:
            await anyio.to_thread.run_sync(watch.start)
        except InotifyUnavailable as exc:
            watch.close()
            if exc.errno != errno.ENOENT:  # the watch limit: not worth a whole walk at every attempt
                self._unwatchable(key, str(exc))
            return None
        watch.last_used = self.monotonic()
        self.watches[key] = watch
        return watch

    @staticmethod
    async def _ignored_dirs(root: Path) -> frozenset[str]:
        """Folders git ignores in ``root`` (not watched: build output, caches)."""
        try:
            r = await git(root, "ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z")
        except GitError:
            return frozenset()
        return frozenset(p.rstrip("/") for p in r.out.split("\0") if p.endswith("/"))

    def _forget_idle(self, keep: str) -> None:
        """Close the watches unused for ``linger`` seconds, and the oldest unused ones beyond :data:`IDLE_WATCHES`
        (a schedule firing every second makes a workspace a second: each would keep an inotify instance)."""
        now = self.monotonic()
        idle = sorted(((w.last_used, key) for key, w in self.watches.items() if key != keep and not w.windows))
        for n, (last_used, key) in enumerate(idle):
            if now - last_used > self.linger or len(idle) - n > IDLE_WATCHES:
                self._close_watch(key)

    def _unwatchable(self, key: str, why: str) -> None:
        """``key`` uses the fallback for :data:`RETRY_WATCH` seconds; entries older than that are dropped here
        (the dict is in the order they were noted), so where nothing can be watched — a mission a second, each
        in a folder of its own — it holds the last minute's folders, not every folder ever seen."""
        now = self.monotonic()
        self.unwatchable.pop(key, None)
        for old, (_, when) in list(self.unwatchable.items()):
            if now - when < RETRY_WATCH:
                break
            del self.unwatchable[old]
        self.unwatchable[key] = (why, now)

    def _close_watch(self, key: str) -> None:
        self.watches.pop(key).close()

    def release(self, root: Path) -> None:
        """A mission that used ``root`` finished: stop watching it unless a window is open there (another
        mission's task in a shared folder: it goes once idle, see :meth:`_forget_idle`), and forget that it could
        not be watched; the next task there starts afresh."""
        key = os.fspath(root)
        self.unwatchable.pop(key, None)
        watch = self.watches.get(key)
        if watch is not None and not watch.windows:
            self._close_watch(key)

    def forget(self, root: Path) -> None:
        """Stop watching ``root`` (a task's worktree about to be removed)."""
        key = os.fspath(root)
        self.unwatchable.pop(key, None)
        watch = self.watches.pop(key, None)
        if watch is not None:
            watch.close()

    def shutdown(self) -> None:
        for watch in self.watches.values():
            watch.close()
        self.watches.clear()
