"""A folder tree watched with inotify, and *windows*: what changed under it between two moments.

Watching costs one walk of the folders when it starts (file entries are not stat'ed) and nothing per attempt
beyond the changes themselves, so a 50 000-file workspace costs an attempt what an empty one does. Folders the
``skip`` rule names (``.git``, ``node_modules``, virtualenvs, git-ignored folders, polpo's state) are not
watched. A folder created while watching is watched at once and scanned, so files written into it before its
watch existed are seen too.

Each window records, per relative path, whether the path existed when the window opened (its first event was
not a create or a move in). A window is *lost* when the kernel queue overflowed or the root went away while it
was open: its record is incomplete and must not be trusted. Not seen by inotify, by design of the kernel: writes
through ``mmap`` and changes made by another machine on a network file system.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from polpo.changes.inotify import IN, Inotify, InotifyUnavailable, RawEvent

__all__ = ["SkipDir", "TreeWatch", "Window"]

SkipDir = Callable[[str, str], bool]
"""(relative path of a folder, its absolute path) → do not watch it (nor anything below it)."""


@dataclass(eq=False)
class Window:
    """Changes under the root while the window is open; ``paths``: relative path → existed when it opened."""

    paths: dict[str, bool] = field(default_factory=dict)
    dirs_gone: set[str] = field(default_factory=set)  # folders deleted or moved away (their files unnamed)
    lost: str | None = None  # why the record is incomplete, when it is

    def note(self, rel: str, existed: bool) -> None:
        self.paths.setdefault(rel, existed)


class TreeWatch:
    """inotify watches on every folder of ``root`` that ``skip`` does not exclude; thread-safe."""

    def __init__(self, root: str, skip: SkipDir) -> None:
        self.root = root
        self.skip = skip
        self.ino = Inotify()
        self.dirs: dict[int, str] = {}  # watch descriptor → relative folder path ("" = root)
        self.windows: set[Window] = set()
        self.lock = threading.Lock()
        self.last_used = time.monotonic()
        self.broken = False  # a watch could not be added (the per-user limit): use the fallback from now on

    # -- life -----------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Watch the whole tree (a walk of its folders); raises :class:`InotifyUnavailable` if the root itself
        cannot be watched (it does not exist yet, or a limit is reached)."""
        with self.lock:
            if self.ino.add(self.root) is None:
                raise InotifyUnavailable(errno.ENOENT, f"cannot watch {self.root}: not a folder (yet)")
            self._watch_tree("", record=False)

    def close(self) -> None:
        with self.lock:
            self.ino.close()
            self.dirs.clear()

    def open(self) -> Window:
        """A new window, after everything queued so far is applied (none of it belongs to the window)."""
        with self.lock:
            self._drain()
            w = Window()
            self.windows.add(w)
            return w

    def close_window(self, w: Window) -> Window:
        """Apply every change queued up to now, then stop recording into ``w``."""
        with self.lock:
            self._drain()
            self.windows.discard(w)
            return w

    def open_at_once(self) -> Window | None:
        """:meth:`open` when it is free: nothing queued and no other thread in the watch; else None.

        Draining queued events may walk new folders, which belongs in a worker thread; an idle watch (the usual
        case between attempts) needs nothing of the kind, and the hop to a thread would cost more than the work.
        """
        return self._at_once(lambda: self._add_window(Window()))

    def close_at_once(self, w: Window) -> Window | None:
        """:meth:`close_window` when it is free (see :meth:`open_at_once`); else None."""
        return self._at_once(lambda: self._end_window(w))

    def _at_once(self, fn: Callable[[], Window]) -> Window | None:
        if not self.lock.acquire(blocking=False):
            return None
        try:
            if self.ino.pending():
                return None
            return fn()
        except OSError:  # closed under us: the slow path knows what to do
            return None
        finally:
            self.lock.release()

    def _add_window(self, w: Window) -> Window:
        self.windows.add(w)
        return w

    def _end_window(self, w: Window) -> Window:
        self.windows.discard(w)
        return w

    # -- events ---------------------------------------------------------------------------------------------
    def _drain(self) -> None:
        try:
            for ev in self.ino.read():
                self._event(ev)
        except InotifyUnavailable as exc:
            self.broken = True
            self._lose(f"cannot watch every folder: {exc}")

    def _event(self, ev: RawEvent) -> None:
        if ev.mask & IN.Q_OVERFLOW:
            self._lose("too many changes at once: the kernel's event queue overflowed")
            self._rewatch()
            return
        base = self.dirs.get(ev.wd)
        if ev.mask & IN.IGNORED:
            self.dirs.pop(ev.wd, None)
            return
        if base is None:
            return
        if ev.mask & (IN.DELETE_SELF | IN.MOVE_SELF):
            if base == "":
                self._lose("the workspace folder was deleted or moved")
            return
        rel = f"{base}/{ev.name}" if base else ev.name
        if ev.mask & IN.ISDIR:
            if ev.mask & (IN.CREATE | IN.MOVED_TO):
                self._watch_tree(rel, record=True)
            elif ev.mask & IN.MOVED_FROM:
                self._unwatch_under(rel)
                for w in self.windows:
                    w.dirs_gone.add(rel)
            return
        existed = not ev.mask & (IN.CREATE | IN.MOVED_TO)
        for w in self.windows:
            w.note(rel, existed)

    def _lose(self, why: str) -> None:
        for w in self.windows:
            w.lost = w.lost or why

    def _rewatch(self) -> None:
        for wd in list(self.dirs):
            self.ino.remove(wd)
        self.dirs.clear()
        self._watch_tree("", record=False)

    def _unwatch_under(self, rel: str) -> None:
        prefix = rel + "/"
        for wd, d in list(self.dirs.items()):
            if d == rel or d.startswith(prefix):
                self.ino.remove(wd)
                del self.dirs[wd]

    def _watch_tree(self, rel: str, *, record: bool) -> None:
        """Watch folder ``rel`` and its subfolders; with ``record``, every file found is new to open windows."""
        stack = [rel]
        while stack:
            d = stack.pop()
            path = os.path.join(self.root, d) if d else self.root
            if d and self.skip(d, path):
                continue
            wd = self.ino.add(path)
            if wd is None:
                continue
            self.dirs[wd] = d
            try:
                with os.scandir(path) as it:
                    for entry in it:
                        child = f"{d}/{entry.name}" if d else entry.name
                        try:
                            is_dir = entry.is_dir(follow_symlinks=False)
                        except OSError:
                            continue
                        if is_dir:
                            stack.append(child)
                        elif record:
                            for w in self.windows:
                                w.note(child, False)
            except OSError:
                continue
