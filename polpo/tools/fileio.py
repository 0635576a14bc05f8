"""Opening workspace files safely, for the file tools.

Files are opened with ``O_NOFOLLOW | O_NONBLOCK`` on the sandbox-resolved real path and must be regular files, so
a symlink swapped in after the sandbox check, a FIFO or a device is refused rather than followed or blocked on.
Everything here blocks: call it from a worker thread.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO

from polpo.tools.output import ToolError
from polpo.tools.sandbox import Sandbox

__all__ = ["PATH_NOTE", "SNIFF_BYTES", "is_binary", "open_regular", "reader", "require_file"]

PATH_NOTE = "Relative to the workspace root; absolute paths and '..' are refused."
"""What the file tools' argument descriptions say about paths."""
SNIFF_BYTES = 8192
"""A NUL byte in this many leading bytes makes a file binary."""


def open_regular(real: Path, flags: int, mode: int = 0o644) -> int:
    """Open ``real`` without following a final symlink and without blocking on FIFOs; regular files only."""
    try:
        fd = os.open(real, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the final component became a symlink after the sandbox check
            raise ToolError("refused to follow a symbolic link", "sandbox") from exc
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolError("not a regular file", "not_a_file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def reader(real: Path) -> IO[bytes]:
    """A binary reader on a regular file (see :func:`open_regular`)."""
    return os.fdopen(open_regular(real, os.O_RDONLY), "rb")


def is_binary(head: bytes) -> bool:
    return b"\x00" in head


def require_file(sb: Sandbox, path: str) -> tuple[Path, str]:
    """The real path and workspace-relative name of an existing regular file, or :class:`ToolError`."""
    real = sb.resolve(path, must_exist=True)
    rel = sb.relative(real)
    if real.is_dir():
        raise ToolError(f"{rel!r} is a directory; use list_dir or glob to see what it contains", "is_a_directory")
    if not real.is_file():
        raise ToolError(f"{rel!r} is not a regular file", "not_a_file")
    return real, rel
