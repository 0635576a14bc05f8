"""Linux inotify through ``ctypes``: one non-blocking descriptor, watches added and removed by path.

Why not a watcher library: the kernel queues an inotify event inside the system call that changed the file, so
once an agent's process has exited, every change it made is already in the queue, and a non-blocking read drains
them all. A library that reads in its own thread and debounces cannot say "everything up to now"; this can.

Closing an instance that has held a watch waits for the kernel's grace period (``synchronize_srcu`` as the group is
destroyed): 8 ms median here, 20 ms at worst, on whichever thread closes it. A mission's watch was closed on the
event loop as the mission finished, so every finished mission stalled the daemon for that long (a dropped 1-task
mission's `mission:completed` came 6–14 ms after its task was done). So :meth:`Inotify.close` hands the
descriptor to one background thread that closes it.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import os
import queue
import struct
import termios
import threading
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["CLOSER_THREAD", "IN", "Inotify", "InotifyUnavailable", "RawEvent", "available"]


class IN:
    """The flags polpo uses (linux/inotify.h)."""

    MODIFY = 0x2
    CLOSE_WRITE = 0x8
    ATTRIB = 0x4
    MOVED_FROM = 0x40
    MOVED_TO = 0x80
    CREATE = 0x100
    DELETE = 0x200
    DELETE_SELF = 0x400
    MOVE_SELF = 0x800
    Q_OVERFLOW = 0x4000
    IGNORED = 0x8000
    ONLYDIR = 0x01000000
    DONT_FOLLOW = 0x02000000
    EXCL_UNLINK = 0x04000000
    ISDIR = 0x40000000
    NONBLOCK = 0o4000
    CLOEXEC = 0o2000000
    WATCH = (MODIFY | MOVED_FROM | MOVED_TO | CREATE | DELETE | DELETE_SELF | MOVE_SELF | ONLYDIR | DONT_FOLLOW
             | EXCL_UNLINK)


class InotifyUnavailable(OSError):
    """No inotify here (not Linux), or the per-user limit of instances or watches is reached."""


@dataclass(frozen=True, slots=True)
class RawEvent:
    wd: int
    mask: int
    cookie: int
    name: str


_HEADER = struct.Struct("iIII")
_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            lib.inotify_init1  # noqa: B018 - raises AttributeError where there is no inotify
        except (OSError, AttributeError) as exc:
            raise InotifyUnavailable(errno.ENOSYS, f"inotify is not available: {exc}") from None
        lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        lib.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        _libc = lib
    return _libc


def available() -> bool:
    try:
        _lib()
        return True
    except InotifyUnavailable:
        return False


class Inotify:
    """One inotify instance; :meth:`read` never blocks."""

    def __init__(self) -> None:
        self._lib = _lib()
        fd = self._lib.inotify_init1(IN.NONBLOCK | IN.CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise InotifyUnavailable(err, f"inotify_init1: {os.strerror(err)}")
        self.fd: int = fd

    def add(self, path: str, mask: int = IN.WATCH) -> int | None:
        """Watch the folder ``path`` for ``mask``'s events; None if it vanished or is not a folder (a race, not an
        error)."""
        wd = self._lib.inotify_add_watch(self.fd, os.fsencode(path), mask)
        if wd >= 0:
            return int(wd)
        err = ctypes.get_errno()
        if err in (errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.ELOOP):
            return None
        raise InotifyUnavailable(err, f"inotify_add_watch {path}: {os.strerror(err)}")

    def remove(self, wd: int) -> None:
        self._lib.inotify_rm_watch(self.fd, wd)  # EINVAL when the kernel dropped it already: fine

    def pending(self) -> int:
        """Bytes of events queued and not read yet (``FIONREAD``)."""
        buf = array.array("i", [0])
        fcntl.ioctl(self.fd, termios.FIONREAD, buf)
        return buf[0]

    def read(self) -> Iterator[RawEvent]:
        """Every event queued now, in order."""
        while True:
            try:
                buf = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return
            pos = 0
            while pos + _HEADER.size <= len(buf):
                wd, mask, cookie, length = _HEADER.unpack_from(buf, pos)
                pos += _HEADER.size
                raw = buf[pos:pos + length].split(b"\0", 1)[0]
                pos += length
                yield RawEvent(wd, mask, cookie, os.fsdecode(raw))

    def close(self) -> None:
        """Stop reading; the descriptor is closed by the closer thread (see the module docstring)."""
        if self.fd >= 0:
            _close_later(self.fd)
            self.fd = -1


_closing: queue.SimpleQueue[int] | None = None
_closing_lock = threading.Lock()
CLOSER_THREAD = "polpo-inotify-close"


def _close_later(fd: int) -> None:
    global _closing
    with _closing_lock:
        if _closing is None:
            _closing = queue.SimpleQueue()
            threading.Thread(target=_closer, args=(_closing,), name=CLOSER_THREAD, daemon=True).start()
    _closing.put(fd)


def _closer(fds: queue.SimpleQueue[int]) -> None:
    while True:
        fd = fds.get()
        with contextlib.suppress(OSError):  # (closed twice would be a bug; nothing to do about it here)
            os.close(fd)
