"""The daemon's side of its guards (:mod:`polpo.tools.guard`): starts a pair, tells both each process group that
:func:`polpo.tools.procs.run_process` starts and ends, and beats. ``may_start`` is the node's own check that it may
still act on its lease: a program started when it may not is killed at once (the run ends as if killed).

Two guards, because a paused daemon cannot replace one that dies: with a single guard, a daemon paused and then
its guard killed left its agents running on past the take-over (nemesis seed 6099). Each guard of the pair holds
every group and keeps the beat's deadline on its own, so either one kills the agents of a paused daemon. A guard
that dies (``kill -9``, the OOM killer) or is stopped (SIGSTOP: it
can kill nothing) is replaced at once: its end is seen on a pidfd in the event loop, a stop by
:meth:`GuardLink.check` (every beat, and every second from :meth:`GuardLink.run`), and a broken pipe by the next
write. The new guard is told every group the link holds. A node
that cannot keep its guards (one cannot be started, or :data:`LOSSES` were lost within :data:`LOSS_WINDOW`
seconds) is told through ``on_lost``: it stops its agents and fences itself (docs/DESIGN.md, "Fencing")."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

import anyio

from polpo.tools import procs
from polpo.tools.proctable import process_state

log = logging.getLogger("polpo.guard")

__all__ = ["LOSSES", "LOSS_WINDOW", "PAIR", "GuardLink", "keeps_guard"]

PAIR = 2  # guards a node keeps

LOSSES = 3  # guards lost within LOSS_WINDOW seconds before the node gives up keeping one
LOSS_WINDOW = 60.0
CHECK_EVERY = 1.0  # seconds between two looks at the guard's state by run() (a beat looks too)


def keeps_guard(losses: Sequence[float], at: float) -> bool:
    """May the node start another guard, having lost one at each of ``losses`` (pure)? Not after
    :data:`LOSSES` losses within :data:`LOSS_WINDOW` seconds: something kills them as fast as they start."""
    return sum(1 for t in losses if at - t < LOSS_WINDOW) < LOSSES


def _held_line(pgid: int) -> bytes:
    """``+PGID``: the guard reads the leader's start time itself (polpo.tools.guard), off the task path."""
    return f"+{pgid}\n".encode()


class _Guard:
    """One guard process of the pair: its pipe, and the pidfd that says in the event loop when it ends."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        assert proc.stdin is not None
        self.fd = proc.stdin.fileno()
        self.pidfd = -1
        self.loop: asyncio.AbstractEventLoop | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def watch_exit(self, on_exit: Callable[[], None]) -> None:
        """Hear of the guard's end at once: its pidfd becomes readable in the event loop (when there is one)."""
        try:
            self.loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        try:
            self.pidfd = os.pidfd_open(self.proc.pid)
        except OSError:  # an old kernel: check() at the next beat sees it
            return
        self.loop.add_reader(self.pidfd, on_exit)

    def unwatch_exit(self) -> None:
        if self.pidfd >= 0:
            if self.loop is not None:
                self.loop.remove_reader(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = -1

    def end(self) -> str:
        rc = self.proc.poll()
        if rc is None:
            return "it is gone"
        return f"it was killed by signal {-rc}" if rc < 0 else f"it exited with code {rc}"

    def lost(self) -> str | None:
        """Why this guard can guard no more (gone, or stopped: a stopped guard kills nothing); None while it can."""
        if self.proc.poll() is not None:
            return self.end()
        if process_state(self.proc.pid) in ("T", "t"):
            return "it was stopped (SIGSTOP)"
        return None

    def let_go(self) -> None:
        """Stop listening for its end and close its pipe (a guard whose pipe closes kills what it holds, exits)."""
        self.unwatch_exit()
        self.fd = -1
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def retire(self) -> None:
        """This guard ends for good: killed (a stopped one too), reaped, its pipe and pidfd closed."""
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.let_go()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=1)  # SIGKILL ends even a stopped process at once

    def reap(self) -> None:
        """Wait for a guard let go of to exit (killed if it does not within 5 s)."""
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class GuardLink:
    def __init__(self, deadline: float | None, may_start: Callable[[], bool] = lambda: True, *,
                 on_lost: Callable[[str], None] | None = None, program: Sequence[str] | None = None,
                 now: Callable[[], float] = time.monotonic, marker: str | None = None) -> None:
        """``deadline``: seconds without a beat before the guards kill (None: only when the daemon dies);
        ``on_lost``: told why once the guards cannot be kept; ``program``: the guard's command (tests);
        ``marker``: the start of this daemon's attempt marker (polpo.tools.marks), so the guards also kill what
        was started and not yet told of."""
        self.deadline = deadline
        self.marker = marker
        self.may_start = may_start
        self.on_lost = on_lost
        self.program = list(program) if program is not None else [sys.executable, "-m", "polpo.tools.guard"]
        self.now = now
        self.guards: list[_Guard] = []  # the pair (fewer only while one is replaced, or once they are lost)
        self.held: set[int] = set()  # the process groups the guards are told they hold
        self.losses: list[float] = []  # when each guard was lost
        self.lost: str | None = None  # why no guard is kept any more
        self._ended: list[bytes] = []  # ``-PGID`` lines not yet sent: they go with the next line (see ended)
        self._closing = False

    def start(self) -> None:
        """Start the pair and watch every process group from now on."""
        for _ in range(PAIR):
            self._spawn()
        procs.WATCH.append(self)

    def _spawn(self) -> None:
        """Start a guard that holds every group the link holds."""
        deadline = "inf" if self.deadline is None else repr(self.deadline)
        proc = subprocess.Popen([*self.program, deadline, str(os.getpid()), *([self.marker] if self.marker else [])],
                                stdin=subprocess.PIPE, start_new_session=True, close_fds=True)
        guard = _Guard(proc)
        self.guards.append(guard)
        with contextlib.suppress(OSError):  # a new guard holds what its predecessor held (one that died at once
            os.write(guard.fd, b"".join(_held_line(g) for g in self.held))  # is seen by its pidfd)
        guard.watch_exit(lambda: self._exited(guard))

    def _exited(self, guard: _Guard) -> None:
        if guard in self.guards and not self._closing:
            self._replace(guard, guard.end())

    def check(self) -> None:
        """Replace a guard that is gone or stopped."""
        if self._closing:
            return
        for guard in list(self.guards):
            if guard in self.guards and (why := guard.lost()) is not None:
                self._replace(guard, why)

    async def run(self) -> None:
        """Look at the guards every :data:`CHECK_EVERY` seconds (an end is heard at once; a stop only so)."""
        while True:
            await anyio.sleep(CHECK_EVERY if self.deadline is None else min(CHECK_EVERY, self.deadline / 6))
            if self._ended:
                self._send(b"")
            self.check()

    def _replace(self, old: _Guard, why: str) -> None:
        """``old`` is lost: end it for good and start another that holds the same groups, or give up."""
        self.guards.remove(old)
        old.retire()
        at = self.now()
        if self.lost is not None:
            return
        if not keeps_guard(self.losses, at):
            self._give_up(f"its guard process was lost {len(self.losses) + 1} times within {LOSS_WINDOW:g} s "
                          f"(the last one: {why})")
            return
        self.losses.append(at)
        log.warning("a guard process (pid %d) was lost: %s; a new one holds this node's %d agent process group(s)",
                    old.pid, why, len(self.held))
        try:
            self._spawn()
        except OSError as e:
            self._give_up(f"a new guard process could not be started ({e.strerror or e})")

    def _give_up(self, reason: str) -> None:
        self.lost = f"this node cannot keep a guard for its agents: {reason}"
        log.error("%s; it stops its agents and leaves", self.lost)
        if self.on_lost is not None:
            self.on_lost(self.lost)

    def beat(self) -> None:
        self._send(b".\n")
        self.check()

    def started(self, pgid: int) -> bool:
        if not self.may_start() or self.lost is not None:
            return False
        self.held.add(pgid)
        self._send(_held_line(pgid))
        return True

    def ended(self, pgid: int) -> None:
        """The group is gone (run_process killed what was left of it). Told with the next line, or within
        :data:`CHECK_EVERY` by :meth:`run`, not now: a write wakes both guards, and a held group that has ended
        costs a guard nothing (its kill finds no process; a reused pid's other start time is skipped). This
        halves the guards' wake-ups per agent run."""
        self.held.discard(pgid)
        self._ended.append(f"-{pgid}\n".encode())

    def _send(self, line: bytes) -> None:
        if self._ended:
            line, self._ended = b"".join(self._ended) + line, []
        for guard in list(self.guards):
            self._write(guard, line)

    def _write(self, guard: _Guard, line: bytes) -> None:
        if guard.fd < 0:
            return
        try:
            os.write(guard.fd, line)  # a few bytes: atomic on a pipe, and the guard reads all the time
        except OSError as e:
            if not self._closing and guard in self.guards:  # (a guard that ended breaks its pipe: say how)
                self._replace(guard, guard.lost() or f"its pipe broke ({e.strerror or e})")

    def close(self) -> None:
        """At the daemon's end: the guards kill what is left (nothing, after a clean stop) and exit."""
        self._closing = True
        if self in procs.WATCH:
            procs.WATCH.remove(self)
        guards, self.guards = self.guards, []
        bye, self._ended = b"".join(self._ended) + b"!\n", []
        for guard in guards:
            self._write(guard, bye)  # a clean stop: what is not held was not started (no marker scan)
            guard.let_go()
        for guard in guards:
            guard.reap()
