"""Reading one file of the missions folder safely: regular files only, never more than the size limit.

The daemon's watcher and ``polpo validate`` both read through :func:`read_mission_file`, so they agree on
every file. What is not read comes back as :class:`Unreadable` with a reason for the person and a digest
that stays the same while the file does, so the daemon rejects that state once and a restart does not
repeat it. A directory, a FIFO, a socket or a device named ``*.json`` is never opened (a FIFO would block
the reader), and a file over the limit is never read whole.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from polpo.fsfaults import INPUT_PASSING, passing

__all__ = ["NOT_REGULAR", "TOO_LARGE", "UNREADABLE", "Unreadable", "file_kind", "read_mission_file"]

NOT_REGULAR = "not a regular file"
TOO_LARGE = "too large"
UNREADABLE = "unreadable"


@dataclass(frozen=True)
class Unreadable:
    """A file that is not read: ``reason`` is one of the constants above, ``message`` says what to do."""

    reason: str
    message: str
    digest: str


def _digest(*parts: object) -> str:
    return hashlib.sha256(":".join(str(p) for p in parts).encode("utf-8", "backslashreplace")).hexdigest()


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _not_regular(what: str) -> Unreadable:
    return Unreadable(NOT_REGULAR, f"not a regular file: it is {what}; polpo reads only regular files",
                      _digest(NOT_REGULAR, what))


def _too_large(size: int, mtime_ns: int, limit: int) -> Unreadable:
    return Unreadable(TOO_LARGE, f"the file is too large ({size} bytes; the limit is {limit} bytes, "
                                 "[daemon] max_mission_bytes)", _digest(TOO_LARGE, size, mtime_ns))


def read_mission_file(path: Path, max_bytes: int, *, raise_passing: bool = False) -> bytes | Unreadable | None:
    """The file's bytes, or why they are not read; None if the file does not exist (any more).

    Symbolic links are followed (a link to a regular file is read); blocking, call it from a worker thread.
    ``raise_passing`` (the daemon): a fault that passes by itself (no file descriptors left,
    :data:`polpo.fsfaults.INPUT_PASSING`) is raised for the caller to try again, never an :class:`Unreadable`.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            return _not_regular("a symbolic link to nothing")
        return None
    except OSError as e:
        if raise_passing and passing(e, INPUT_PASSING):
            raise
        if e.errno == errno.ELOOP:
            return _not_regular("a symbolic link loop")
        return Unreadable(UNREADABLE, f"cannot read the file: {e.strerror or e}", _digest(UNREADABLE, e.errno))
    if not stat.S_ISREG(st.st_mode):
        what = file_kind(st.st_mode)
        return _not_regular(what + (" behind a symbolic link" if os.path.islink(path) else ""))
    if st.st_size > max_bytes:
        return _too_large(st.st_size, st.st_mtime_ns, max_bytes)
    try:
        # O_NONBLOCK: if the name became a FIFO since the stat, opening it must not wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as e:
        if raise_passing and passing(e, INPUT_PASSING):
            raise
        return Unreadable(UNREADABLE, f"cannot read the file: {e.strerror or e}",
                          _digest(UNREADABLE, e.errno, st.st_size, st.st_mtime_ns))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return _not_regular(file_kind(st.st_mode))
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as e:
        if raise_passing and passing(e, INPUT_PASSING):
            raise
        return Unreadable(UNREADABLE, f"cannot read the file: {e.strerror or e}",
                          _digest(UNREADABLE, e.errno, st.st_size, st.st_mtime_ns))
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    if len(raw) > max_bytes:  # it grew after the stat
        return _too_large(max(len(raw), st.st_size), st.st_mtime_ns, max_bytes)
    return raw
