"""Reading a workspace file's text for a prompt: confined, regular files only, at most N bytes.

What a review shows a model of the work (the changed files, a reference, scored examples, the digest a later
comparison reads) is read from a folder the agent wrote. A link there may point anywhere, a FIFO blocks a plain
``read_text`` forever, and a file may be gigabytes. So the path goes through the workspace's
:class:`~polpo.tools.sandbox.Sandbox` (no absolute path, no ``..``, no link out), the file must be a regular
file, and only its first ``limit`` bytes are read (opened without following a final link, non-blocking).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import NamedTuple

from polpo.tools.sandbox import Sandbox, SandboxError

__all__ = ["Bounded", "read_confined", "read_text_bounded"]


class Bounded(NamedTuple):
    """A confined read: the text, whether the file is longer than what was read, its bytes read, its real path."""

    text: str
    cut: bool
    size: int
    real: str


def read_text_bounded(workspace: Path, name: str, limit: int) -> tuple[str, bool] | None:
    """``(text, cut)`` of ``name`` in ``workspace`` — at most ``limit`` bytes, decoded as UTF-8 (None when it is
    not UTF-8 text), ``cut`` when the file is longer — or None when it is outside, missing or not a regular
    file."""
    read = read_confined(Sandbox(workspace), name, limit)
    return None if read is None else (read.text, read.cut)


def read_confined(sandbox: Sandbox, name: str, limit: int) -> Bounded | None:
    """:func:`read_text_bounded` through a sandbox made once for many reads (its root is resolved when made)."""
    try:
        real = sandbox.resolve(name, must_exist=True)
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except (SandboxError, OSError):
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        data = os.read(fd, limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    cut = len(data) > limit
    data = data[:limit]
    try:
        return Bounded(data.decode("utf-8"), cut, len(data), os.fspath(real))
    except UnicodeDecodeError as exc:
        if cut and exc.start >= limit - 3:  # the cut fell inside a character: keep the text before it
            return Bounded(data[:exc.start].decode("utf-8", errors="replace"), True, exc.start, os.fspath(real))
        return None
