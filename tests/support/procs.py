"""Whether a process is gone: a zombie counts as dead (it has exited; only its parent has not reaped it yet).

After ``kill -9`` of a daemon its orphans are reparented to PID 1, which may reap them late: a killed orphan
can stay a zombie for a while, and ``os.kill(pid, 0)`` still succeeds on it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio

__all__ = ["dies", "guards_of", "is_dead", "pid_in", "wait_dead"]


def pid_in(path: Path) -> int | None:
    """The pid a script wrote with ``echo $$ > path``; None until the whole line is there (the file exists,
    empty, between the shell's open and its write)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return int(text) if text.endswith("\n") else None


def is_dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return raw[raw.rfind(b")") + 2:].split()[0] in (b"Z", b"X")


def wait_dead(pid: int, seconds: float = 10.0) -> bool:
    """Blocking: for synchronous tests only."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not is_dead(pid):
        time.sleep(0.02)
    return is_dead(pid)


async def dies(pid: int, within: float = 5.0) -> bool:
    """Whether ``pid`` is dead within ``within`` seconds, without blocking the event loop."""
    with anyio.move_on_after(within):
        while not is_dead(pid):
            await anyio.sleep(0.02)
    return is_dead(pid)


def guards_of(daemon: int) -> list[int]:
    """The daemon's live guard processes (its children that run polpo.tools.guard)."""
    found = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_bytes()
            cmd = (p / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if int(fields[1]) == daemon and b"polpo.tools.guard" in cmd and fields[0] not in (b"Z", b"X"):
            found.append(int(p.name))
    return found
