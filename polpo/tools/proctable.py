"""The process table and process groups (Linux ``/proc``): start times, orphan search, group signals.

A pid plus its start time (:func:`process_start_ticks`) tells a process from a later one that reused its pid;
:func:`find_processes_with_env` finds the processes of a crashed daemon's attempts by their marker variable;
:func:`kill_group` / :func:`terminate_group` end a whole process group, never the daemon's own.
"""

from __future__ import annotations

import os
import signal

import anyio

from polpo.tools.procscan import pids, with_env

__all__ = ["find_processes_with_env", "group_alive", "kill_group", "process_start_ticks", "process_state",
           "terminate_group"]

_POLL_START = 0.02
_POLL_MAX = 0.2


def _read_stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat from field 3 (state) on, or None if unreadable/vanished."""
    try:  # os.open and one read (the file is a few hundred bytes): no buffered file object, once per spawn
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        try:
            raw = os.read(fd, 4096)
        finally:
            os.close(fd)
    except OSError:
        return None
    # Field 2 (comm) is in parentheses and may itself contain spaces and parentheses: split after the last ')'.
    close = raw.rfind(b")")
    if close < 0:
        return None
    return raw[close + 1 :].decode("ascii", errors="replace").split()


def process_state(pid: int) -> str | None:
    """The state letter of ``pid`` (``R``, ``S``, ``T`` stopped, ``Z``…), or None if it is gone."""
    fields = _read_stat_fields(pid)
    return fields[0] if fields else None


def process_start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (field 22 of /proc/<pid>/stat), or None if it is gone.

    Store it next to a pid: if the value differs later, the pid was reused by another process.
    """
    fields = _read_stat_fields(pid)
    if fields is None or len(fields) < 20:
        return None
    try:
        return int(fields[19])  # field 22; fields[] starts at field 3
    except ValueError:
        return None


def group_alive(pgid: int) -> bool:
    """True if some process of group ``pgid`` exists and is not a zombie."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Something answers, but zombies answer too (and nobody may reap them): look at the members' states.
    for pid in pids():
        fields = _read_stat_fields(pid)
        if fields is None or len(fields) < 3:
            continue
        state, pgrp = fields[0], fields[2]
        if pgrp == str(pgid) and state not in ("Z", "X", "x"):
            return True
    return False


def find_processes_with_env(key: str, value: str, *, prefix: bool = False) -> list[int]:
    """Pids (sorted) whose initial environment contains ``key=value`` exactly.

    Scans ``/proc/*/environ``, skipping processes that vanished or cannot be read (other users', zombies). The
    calling process itself is never listed. Used after a crash to find the orphans of the previous daemon, whose
    children carry a per-attempt marker variable. ``prefix``: the value only starts with ``value`` (every
    attempt of one state folder).
    """
    return with_env(f"{key}={value}".encode(), prefix=prefix)


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> bool:
    """Send ``sig`` to process group ``pgid``; True if something was signalled.

    Refuses (returns False) for pgid ≤ 1 and for the caller's own group, so a bad stored value can never take the
    daemon down. A vanished group or one we may not signal also gives False.
    """
    if pgid <= 1 or pgid == os.getpgrp():
        return False
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def terminate_group(pgid: int, grace: float) -> None:
    """SIGTERM the group, wait up to ``grace`` seconds for its members to exit, then SIGKILL whatever is left.

    Not shielded by itself: callers that run it during cancellation wrap it in ``CancelScope(shield=True)``.
    """
    if not kill_group(pgid, signal.SIGTERM):
        return
    with anyio.move_on_after(max(0.0, grace)):
        delay = _POLL_START
        while group_alive(pgid):
            await anyio.sleep(delay)
            delay = min(delay * 2, _POLL_MAX)
    kill_group(pgid, signal.SIGKILL)
