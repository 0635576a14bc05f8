"""Nothing an agent starts outlives its attempt, not even a process that left its group with ``setsid``.

Killing an attempt's process group ends everything in the group; a descendant that called ``setsid`` (a
daemonising tool, ``nohup … &`` in a new session) is in another group. The daemon makes itself a *child
subreaper* (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``): such a descendant, once its parent is gone, becomes the
daemon's child instead of init's, so the daemon can see it (its main thread's ``/proc/self/task/PID/children``)
and, from the attempt marker in its environment, tell which attempt it belongs to. :func:`sweep` kills the adopted
processes of attempts that have ended and reaps adopted processes that exited. It costs a few small reads; the
engine runs it after attempts end (at most every 0.2 s) and the daemon every few seconds. Without the subreaper (another OS, or an embedding program that does not ask for it)
escapees go to init, and only the marker scan after a crash finds them.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path

import anyio

from polpo.tools.marks import ATTEMPT_MARK, daemon_mark
from polpo.tools.proctable import find_processes_with_env, terminate_group

log = logging.getLogger("polpo.orphans")

__all__ = ["adopted", "become_subreaper", "sweep"]

_PR_SET_CHILD_SUBREAPER = 36
_subreaper = False


def become_subreaper() -> bool:
    """Ask Linux to give this process the orphaned descendants of its children. True if it did."""
    global _subreaper
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        _subreaper = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        _subreaper = False
    return _subreaper


def adopted(known: set[int]) -> list[int]:
    """This process's children that it did not start itself (``known``): orphans it adopted as a subreaper.

    Only the main thread's ``children`` file is read. Linux hands an orphan to the subreaper's first live thread,
    which is the thread-group leader (``find_alive_thread`` in kernel/exit.c), whichever thread started the
    orphan's parent; other threads list only the children they started themselves, which are ``known``. Reading
    every thread's file cost ~0.5 ms per attempt with anyio's worker threads around.
    """
    try:
        with open(f"/proc/self/task/{os.getpid()}/children") as f:
            pids = f.read().split()
    except OSError:
        return []
    return [p for p in map(int, pids) if p not in known]


def _mark_of(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return None
    prefix = f"{ATTEMPT_MARK}=".encode()
    for item in env.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix):].decode(errors="replace")
    return None


_ours: set[int] = set()  # adopted processes that carry an attempt marker (ours to reap)


def sweep(known: set[int], is_live: Callable[[str], bool]) -> int:
    """Kill adopted processes whose attempt is not live (by their marker) and reap the ones that exited.

    ``known``: pids this process started and still waits for (never touched here); ``is_live(mark)``: whether
    the attempt a marker names is still running. Only processes that carry an attempt marker are killed or
    reaped, so children started by other means keep their exit status for whoever waits for them.
    Returns how many processes were killed.
    """
    if not _subreaper:
        return 0
    killed = 0
    for pid in adopted(known):
        if pid in _ours:
            _reap(pid)
            continue
        mark = _mark_of(pid)
        if mark is None or is_live(mark):
            # no marker (a zombie, a process polpo did not start) or its attempt still runs: a server the attempt
            # started on purpose, or a child polpo is starting right now and has not registered yet, which is not
            # an orphan and must stay unreaped here (its exit status belongs to whoever started it)
            continue
        _ours.add(pid)
        try:
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
            killed += 1
        except (ProcessLookupError, PermissionError):
            pass
        _reap(pid)
    if killed:
        log.warning("killed %d process(es) that outlived their attempt", killed)
    return killed


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            _ours.discard(pid)


async def kill_state_dir_orphans(state_dir: Path, grace: float = 2.0) -> int:
    """End every process an attempt of this state folder left running (this node's previous life: after a
    ``kill -9`` the leader of a cluster has given those tasks to other nodes, so they must not go on here)."""
    groups: set[int] = set()
    for pid in find_processes_with_env(ATTEMPT_MARK, daemon_mark(state_dir), prefix=True):
        try:
            groups.add(os.getpgid(pid))
        except ProcessLookupError:
            continue
    groups.discard(os.getpgid(0))
    if groups:
        async with anyio.create_task_group() as tg:
            for g in sorted(groups):
                tg.start_soon(terminate_group, g, grace)
        log.warning("killed %d process group(s) left by this node's previous run", len(groups))
    return len(groups)
