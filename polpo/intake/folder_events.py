"""What changed in the missions folder, as batches of mission file names, the moment the kernel says so.

On Linux the folder is watched with inotify (:mod:`polpo.changes.inotify`) and the event loop waits on its
descriptor: a dropped file is seen in the same turn of the loop, and an idle daemon is not woken at all.
watchfiles, which the intake used before, collects events in a thread and hands a batch over once ``step``
milliseconds pass without a new one: measured here, 5–10 ms of every dropped mission's latency, and 200 wake-ups
of that thread a second, each taking the GIL, while the daemon had nothing to do (9 ms of CPU a second idle; a
1 ms step halved the latency and doubled the idle cost). watchfiles stays the watcher where inotify is not
there (not Linux, no instance left) and where its events do not arrive (``[daemon] force_polling``, network file
systems).

Each source yields an empty batch once it is live (the intake scans the folder then, for files that arrived
before), and None when events were lost (the kernel's queue overflowed): the intake scans the folder again. The
folder itself going away ends the watch with :class:`FolderGone`.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import AsyncGenerator, Callable
from pathlib import Path

import anyio
from watchfiles import Change, awatch

from polpo.changes.inotify import IN, Inotify, available

__all__ = ["MASK", "WATCH_STEP_MS", "Batch", "FolderGone", "folder_events", "inotify_events", "watchfiles_events"]

Batch = list[Path] | None
"""Mission files that changed (empty: the watch is live), or None: changes were lost, scan the folder."""
MASK = IN.CREATE | IN.ATTRIB | IN.CLOSE_WRITE | IN.MOVED_TO | IN.ONLYDIR | IN.DONT_FOLLOW
"""A name made (a link, a folder, a pipe: what is not written and closed), a file closed after writing, touched
(a save of the same bytes: ``touch`` is how a finished mission is run again) or renamed into the folder. Not each
write: a writer is read once it closes the file, whole, not at every chunk. The folder's own end comes with any
mask (``IN_DELETE_SELF``, ``IN_MOVE_SELF``, ``IN_IGNORED``)."""
_GONE = IN.DELETE_SELF | IN.MOVE_SELF | IN.IGNORED
WATCH_STEP_MS = 5
"""watchfiles hands a batch over after this much quiet (its thread wakes this often, even when idle)."""


class FolderGone(FileNotFoundError):
    """The watched folder was removed or moved away."""

    def __init__(self, folder: Path) -> None:
        super().__init__(errno.ENOENT, "the missions folder was removed or moved away", str(folder))


def folder_events(folder: Path, stop: anyio.Event, *, force_polling: bool,
                  wanted: Callable[[Path], bool]) -> AsyncGenerator[Batch, None]:
    """The folder's changes from inotify where it works, else from watchfiles (see the module docstring)."""
    if not force_polling and available():
        return inotify_events(folder, wanted)
    return watchfiles_events(folder, stop, force_polling=force_polling, wanted=wanted)


async def inotify_events(folder: Path, wanted: Callable[[Path], bool]) -> AsyncGenerator[Batch, None]:
    """Batches from one inotify instance; ends by cancellation (the caller's stop). Raises
    :class:`~polpo.changes.inotify.InotifyUnavailable` when no instance or watch can be had (EMFILE: a passing
    fault the intake waits out), :class:`FolderGone` when the folder goes."""
    ino = Inotify()
    try:
        if ino.add(str(folder), MASK) is None:
            raise FolderGone(folder)
        yield []
        while True:
            await anyio.wait_readable(ino.fd)
            names: dict[str, None] = {}
            lost = False
            for ev in ino.read():
                if ev.mask & IN.Q_OVERFLOW:
                    lost = True
                elif ev.mask & _GONE:
                    raise FolderGone(folder)
                elif ev.name and not (ev.mask & IN.CREATE and _being_written(folder / ev.name)):
                    names[ev.name] = None
            if lost:
                yield None
            paths = [path for name in names if wanted(path := folder / name)]
            if paths:
                yield paths
    finally:
        ino.close()


async def watchfiles_events(folder: Path, stop: anyio.Event, *, force_polling: bool,
                            wanted: Callable[[Path], bool]) -> AsyncGenerator[Batch, None]:
    """Batches from watchfiles; ends when ``stop`` is set."""
    first = True
    async for changes in awatch(folder, watch_filter=lambda _c, p: wanted(Path(p)), recursive=False,
                                stop_event=stop, force_polling=force_polling or None, step=WATCH_STEP_MS,
                                rust_timeout=1000, yield_on_timeout=True):
        if first:
            first = False
            yield []
        paths = [Path(p) for change, p in changes
                 if change in (Change.added, Change.modified) and Path(p).parent == folder]
        if paths:
            yield paths


def _being_written(path: Path) -> bool:
    """A file just made, still empty and of one name: a writer that will close it (its close is the event)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size == 0 and st.st_nlink == 1
