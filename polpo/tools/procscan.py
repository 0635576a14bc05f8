"""The process table read from ``/proc`` with nothing but :mod:`os`: shared by the daemon (:mod:`.proctable`) and
its guard (:mod:`.guard`, which must start in milliseconds and so imports nothing heavy)."""

from __future__ import annotations

import os

__all__ = ["pid_alive", "pids", "with_env"]


def pids() -> list[int]:
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    return [int(name) for name in names if name.isdigit()]


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def with_env(needle: bytes, *, prefix: bool = False) -> list[int]:
    """Pids (sorted, never the caller's) whose initial environment holds the variable ``needle`` (``KEY=value``),
    or with ``prefix`` one that starts with it. Processes that vanished or cannot be read are skipped."""
    me = os.getpid()
    found: list[int] = []
    for pid in pids():
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        variables = data.split(b"\0")
        if any(v.startswith(needle) for v in variables) if prefix else needle in variables:
            found.append(pid)
    return sorted(found)
