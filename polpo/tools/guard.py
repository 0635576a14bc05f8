"""A node's guard: a small process of its own that kills the agents when the daemon stops beating.

Agents are separate processes, so a daemon that is paused (SIGSTOP, a debugger, a stalled VM) cannot stop them,
and another node may take their tasks over once the lease runs out. The daemon starts this guard with a pipe
(:mod:`polpo.tools.guard_link`) and writes one line per event: ``+PGID TICKS`` when an agent's process group is
started (the guard reads the leader's start time itself when TICKS is left out), ``-PGID`` when it has
ended, ``.`` as a beat while the node may act on its lease. When no line came for
the deadline, the guard kills every group it holds (SIGKILL) and forgets them; when the pipe closes (the daemon
died, even by SIGKILL) it kills them and exits. It lives in a session of its own, so signals to the daemon's
process group (a terminal's Ctrl-Z) do not reach it.

Guards come in pairs (:mod:`polpo.tools.guard_link`): each is told every line and holds every group, and neither
needs the other, so one that dies while the daemon is paused (and cannot replace it) leaves the other to kill at
the deadline. A guard that dies or stops is replaced by the daemon.

Its limit: it runs on the same machine; a whole-machine freeze pauses it too, and a paused daemon whose two guards
are both killed leaves its agents unguarded (see docs/how-to/cluster.md).
Run as ``python -m polpo.tools.guard DEADLINE DAEMON_PID``; it imports nothing heavy (starts in
~30 ms). A DEADLINE of ``inf`` (a daemon on SQLite: nobody takes its tasks over while it is paused) kills only
when the pipe closes.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

__all__ = ["Held", "main"]


class Held:
    """The process groups this guard holds: pgid -> its leader's start time (to skip a reused pid)."""

    def __init__(self) -> None:
        self.groups: dict[int, int | None] = {}

    def apply(self, line: bytes) -> None:
        """One line from the daemon (bookkeeping; a beat changes nothing here). ``+PGID`` without its leader's
        start time: the guard reads it itself, now (the group was just started, or is still held), so the daemon
        spends no ``/proc`` read per agent on its task path; ``-`` is an unknown start time."""
        parts = line.split()
        if not parts or parts[0] == b".":
            return
        try:
            pgid = int(parts[0][1:])
            ticks = int(parts[1]) if len(parts) > 1 and parts[1] != b"-" else None
        except ValueError:
            return
        if parts[0].startswith(b"+"):
            self.groups[pgid] = ticks if len(parts) > 1 else _start_ticks(pgid)
        elif parts[0].startswith(b"-"):
            self.groups.pop(pgid, None)

    def kill_all(self) -> int:
        killed = 0
        for pgid, ticks in self.groups.items():
            if ticks is not None and _start_ticks(pgid) not in (None, ticks):
                continue  # the leader's pid now belongs to another process (its group cannot be ours)
            try:
                os.killpg(pgid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        self.groups.clear()
        return killed


def _start_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
        return int(raw[raw.rfind(b")") + 1:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _now() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    deadline, daemon = float(args[0]), args[1] if len(args) > 1 else "?"
    poll = None if deadline == float("inf") else max(0.01, deadline / 6)  # inf: only the daemon's death kills
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only the pipe tells this guard to go
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    held = Held()
    last = _now()
    pending = b""
    while True:
        ready, _, _ = select.select([0], [], [], poll)
        if ready:
            chunk = os.read(0, 65536)
            if not chunk:
                n = held.kill_all()
                if n:
                    print(f"polpo guard: the daemon (pid {daemon}) is gone; killed {n} agent process group(s)",
                          file=sys.stderr, flush=True)
                return 0
            last = _now()
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                held.apply(line)
        elif poll is not None and held.groups and _now() - last > deadline:
            n = held.kill_all()
            print(f"polpo guard: the daemon (pid {daemon}) has not beaten for {_now() - last:.1f} s "
                  f"(deadline {deadline:g} s); killed {n} agent process group(s)", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
