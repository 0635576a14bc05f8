"""The state folder's lock: one daemon per state folder. The daemon holds an exclusive ``flock`` on
``<state_dir>/daemon.lock`` for its life, with its pid written in the file; the CLI probes it
(:mod:`polpo.daemon_probe`) to say whether a daemon runs."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import TextIO

__all__ = ["StateInUse", "lock_path", "release", "take"]


class StateInUse(Exception):
    """Another live daemon holds the folder; ``pid`` is what it wrote ("?" when unreadable)."""

    def __init__(self, state_dir: Path, pid: str) -> None:
        super().__init__(f"another polpo daemon (pid {pid}) is using {state_dir}; stop it first "
                         "or give this one another state_dir")
        self.pid = pid


def lock_path(state_dir: Path) -> Path:
    return state_dir / "daemon.lock"


def take(state_dir: Path) -> TextIO:
    """Hold the folder (the open file is the lock; keep it until :func:`release`), or :class:`StateInUse`."""
    f = open(lock_path(state_dir), "a+")  # noqa: SIM115 - held for the daemon's life
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        other = f.read().strip() or "?"
        f.close()
        raise StateInUse(state_dir, other) from None
    f.seek(0)
    f.truncate()
    f.write(str(os.getpid()))
    f.flush()
    return f


def release(f: TextIO) -> None:
    fcntl.flock(f, fcntl.LOCK_UN)
    f.close()
