"""A node's guard: a small process of its own that kills the agents when the daemon stops beating.

Agents are separate processes, so a daemon that is paused (SIGSTOP, a debugger, a stalled VM) cannot stop them,
and another node may take their tasks over once the lease runs out. The daemon starts this guard with a pipe
(:mod:`polpo.tools.guard_link`) and writes one line per event: ``+PGID TICKS`` when an agent's process group is
started (the guard reads the leader's start time itself when TICKS is left out), ``-PGID`` when it has
ended, ``.`` as a beat while the node may act on its lease, ``!`` before a clean stop closes the pipe. When no
line came for the deadline, the guard kills every group it holds (SIGKILL) and forgets them; when the pipe closes
(the daemon died, even by SIGKILL) it kills them and exits. It lives in a session of its own, so signals to the daemon's
process group (a terminal's Ctrl-Z) do not reach it.

Guards come in pairs (:mod:`polpo.tools.guard_link`): each is told every line and holds every group, and neither
needs the other, so one that dies while the daemon is paused (and cannot replace it) leaves the other to kill at
the deadline. A guard that dies or stops is replaced by the daemon.

An agent the daemon started but had not yet told the guards of (a ``kill -9`` between the spawn and the ``+PGID``
line: nemesis seed 8605) is found by the marker every attempt's processes carry in their environment
(:mod:`polpo.tools.marks`): when the guard kills, it also kills every process marked with this daemon's state
folder, and their groups.

Its limit: it runs on the same machine; a whole-machine freeze pauses it too, and a paused daemon whose two guards
are both killed leaves its agents unguarded (see docs/how-to/cluster.md).
Run as ``python -m polpo.tools.guard DEADLINE DAEMON_PID [MARK_PREFIX]``; it imports nothing heavy (starts in
~30 ms). A DEADLINE of ``inf`` (a daemon on SQLite: nobody takes its tasks over while it is paused) kills only
when the pipe closes.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

from polpo.tools.procscan import pid_alive, with_env

__all__ = ["GATHER", "MARK", "Held", "gather_for", "kill_marked", "main"]

MARK = b"POLPO_ATTEMPT_MARK="  # polpo.tools.marks.ATTEMPT_MARK (not imported: this process imports nothing heavy)
RESCAN_AFTER = 0.1  # seconds: a process exec'd a moment ago may show its environment only later (a kernel race)
GATHER = 0.05  # seconds the guard sleeps after a read, so what the daemon writes meanwhile comes in one read


def gather_for(deadline: float) -> float:
    """How long to sleep after a read (pure): :data:`GATHER`, or a tenth of a short deadline. A guard woken by
    every line cost the machine ~50 µs of CPU per agent run, each; gathering makes it ~20 reads a second at
    most, whatever the rate of runs, and delays a kill by at most this."""
    return min(GATHER, deadline / 10)


class Held:
    """The process groups this guard holds: pgid -> its leader's start time (to skip a reused pid)."""

    def __init__(self) -> None:
        self.groups: dict[int, int | None] = {}

    def apply(self, line: bytes) -> None:
        """One line from the daemon (bookkeeping; a beat changes nothing here). ``+PGID`` without its leader's
        start time: the guard reads it itself, now (the group was just started, or is still held), so the daemon
        spends no ``/proc`` read per agent on its task path; ``-`` is an unknown start time."""
        parts = line.split()
        if not parts or parts[0] in (b".", b"!"):
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


def kill_marked(prefix: str, spare: tuple[int, ...] = (), done: frozenset[int] = frozenset()) -> int:
    """Kill every process marked with ``prefix`` (the daemon's state folder) and its group, looking twice; how
    many groups. A group in ``done`` was killed already; one in ``spare`` (the guard's, the daemon's) is never
    signalled whole, only the marked process."""
    needle = MARK + prefix.encode()
    groups: set[int] = set()
    for look in range(2):
        if look:
            time.sleep(RESCAN_AFTER)
        for pid in with_env(needle, prefix=True):
            try:
                pgid = os.getpgid(pid)
                if pgid in done or pgid in groups:
                    continue
                if pgid in spare or pgid <= 1:
                    os.kill(pid, signal.SIGKILL)
                else:
                    os.killpg(pgid, signal.SIGKILL)
                groups.add(pgid)
            except (ProcessLookupError, PermissionError):
                pass
    return len(groups)


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
    mark = args[2] if len(args) > 2 else None
    spare = (os.getpgid(0),) + ((os.getpgid(int(daemon)),) if daemon.isdigit() and pid_alive(int(daemon)) else ())
    held = Held()

    def kill_all() -> int:
        """The held groups, then those of whatever else carries this daemon's marker (started, not yet told)."""
        done = frozenset(held.groups)
        n = held.kill_all()
        return n + (kill_marked(mark, spare, done) if mark else 0)
    poll = None if deadline == float("inf") else max(0.01, deadline / 6)  # inf: only the daemon's death kills
    gather = gather_for(deadline)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only the pipe tells this guard to go
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    last = _now()
    acted = False  # killed since the daemon's last line: a paused daemon's marker is looked for once
    clean = False  # the daemon said it stops cleanly: it started nothing it did not tell of
    pending = b""
    while True:
        ready, _, _ = select.select([0], [], [], poll)
        if ready:
            chunk = os.read(0, 65536)
            if not chunk:  # the daemon is gone, or it closed the pipe at a clean stop (its "!" line came first)
                n = held.kill_all() if clean else kill_all()
                if n:
                    print(f"polpo guard: the daemon (pid {daemon}) is gone; killed {n} agent process group(s)",
                          file=sys.stderr, flush=True)
                return 0
            last, acted = _now(), False
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                clean = clean or line == b"!"
                held.apply(line)
            time.sleep(gather)
        elif poll is not None and (held.groups or (mark and not acted)) and _now() - last > deadline:
            acted = True
            n = kill_all()
            if not n:
                continue
            print(f"polpo guard: the daemon (pid {daemon}) has not beaten for {_now() - last:.1f} s "
                  f"(deadline {deadline:g} s); killed {n} agent process group(s)", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
