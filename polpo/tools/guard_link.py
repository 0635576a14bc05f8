"""The daemon's side of its guard (:mod:`polpo.tools.guard`): starts it, tells it each process group that
:func:`polpo.tools.procs.run_process` starts and ends, and beats. ``may_start`` is the node's own check that it may
still act on its lease: a program started when it may not is killed at once (the run ends as if killed).

A guard that dies (``kill -9``, the OOM killer) or is stopped (SIGSTOP: it can kill nothing) is replaced at once:
its end is seen on a pidfd in the event loop, a stop by :meth:`GuardLink.check` (every beat, and every second from
:meth:`GuardLink.run`), and a broken pipe by the next write. The new guard is told every group the link holds, so
the agents are never left unguarded for longer than that turn of the loop. A node that cannot keep a guard (one
cannot be started, or :data:`LOSSES` were lost within :data:`LOSS_WINDOW` seconds) is told through ``on_lost``:
it stops its agents and fences itself (docs/DESIGN.md, "Fencing")."""

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

__all__ = ["LOSSES", "LOSS_WINDOW", "GuardLink", "keeps_guard"]

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


class GuardLink:
    def __init__(self, deadline: float | None, may_start: Callable[[], bool] = lambda: True, *,
                 on_lost: Callable[[str], None] | None = None, program: Sequence[str] | None = None,
                 now: Callable[[], float] = time.monotonic) -> None:
        """``deadline``: seconds without a beat before the guard kills (None: only when the daemon dies);
        ``on_lost``: told why once no guard can be kept; ``program``: the guard's command (tests)."""
        self.deadline = deadline
        self.may_start = may_start
        self.on_lost = on_lost
        self.program = list(program) if program is not None else [sys.executable, "-m", "polpo.tools.guard"]
        self.now = now
        self.proc: subprocess.Popen[bytes] | None = None
        self.held: set[int] = set()  # the process groups the guard is told it holds
        self.losses: list[float] = []  # when each guard was lost
        self.lost: str | None = None  # why no guard is kept any more
        self._fd = -1
        self._pidfd = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False

    def start(self) -> None:
        """Start the guard and watch every process group from now on."""
        self._spawn()
        procs.WATCH.append(self)

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def _spawn(self) -> None:
        deadline = "inf" if self.deadline is None else repr(self.deadline)
        self.proc = subprocess.Popen([*self.program, deadline, str(os.getpid())],
                                     stdin=subprocess.PIPE, start_new_session=True, close_fds=True)
        assert self.proc.stdin is not None
        self._fd = self.proc.stdin.fileno()
        with contextlib.suppress(OSError):  # a new guard holds what its predecessor held (one that died at once
            os.write(self._fd, b"".join(_held_line(g) for g in self.held))  # is seen by its pidfd)
        self._watch_exit()

    def _watch_exit(self) -> None:
        """Hear of the guard's end at once: its pidfd becomes readable in the event loop (when there is one)."""
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        assert self.proc is not None
        try:
            self._pidfd = os.pidfd_open(self.proc.pid)
        except OSError:  # an old kernel: check() at the next beat sees it
            return
        self._loop.add_reader(self._pidfd, self._exited)

    def _unwatch_exit(self) -> None:
        if self._pidfd >= 0:
            if self._loop is not None:
                self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1

    def _exited(self) -> None:
        if self.proc is not None and not self._closing:
            self._replace(self._end_of(self.proc))

    @staticmethod
    def _end_of(proc: subprocess.Popen[bytes]) -> str:
        rc = proc.poll()
        if rc is None:
            return "it is gone"
        return f"it was killed by signal {-rc}" if rc < 0 else f"it exited with code {rc}"

    def check(self) -> None:
        """Replace the guard if it is gone or stopped (a stopped guard kills nothing)."""
        if self.proc is None or self._closing:
            return
        if self.proc.poll() is not None:
            self._replace(self._end_of(self.proc))
        elif process_state(self.proc.pid) in ("T", "t"):
            self._replace("it was stopped (SIGSTOP)")

    async def run(self) -> None:
        """Look at the guard every :data:`CHECK_EVERY` seconds (its end is heard at once; a stop only so)."""
        while True:
            await anyio.sleep(CHECK_EVERY if self.deadline is None else min(CHECK_EVERY, self.deadline / 6))
            self.check()

    def _replace(self, why: str) -> None:
        """The guard is lost: end it for good and start another that holds the same groups, or give up."""
        old = self.proc
        assert old is not None
        self._retire()
        at = self.now()
        if self.lost is not None:
            return
        if not keeps_guard(self.losses, at):
            self._give_up(f"its guard process was lost {len(self.losses) + 1} times within {LOSS_WINDOW:g} s "
                          f"(the last one: {why})")
            return
        self.losses.append(at)
        try:
            self._spawn()
        except OSError as e:
            self._give_up(f"a new guard process could not be started ({e.strerror or e})")
            return
        log.warning("the guard process (pid %d) was lost: %s; a new one (pid %s) holds this node's %d agent "
                    "process group(s)", old.pid, why, self.pid, len(self.held))

    def _retire(self) -> None:
        """The current guard ends for good: killed (a stopped one too), reaped, its pipe and pidfd closed."""
        old, self.proc = self.proc, None
        self._unwatch_exit()
        self._fd = -1
        if old is None:
            return
        with contextlib.suppress(OSError):
            old.kill()
        if old.stdin is not None:
            with contextlib.suppress(OSError):
                old.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            old.wait(timeout=1)  # SIGKILL ends even a stopped process at once

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
        self.held.discard(pgid)
        self._send(f"-{pgid}\n".encode())

    def _send(self, line: bytes) -> None:
        if self._fd < 0:
            return
        try:
            os.write(self._fd, line)  # a few bytes: atomic on a pipe, and the guard reads all the time
        except OSError as e:
            if not self._closing and self.proc is not None:
                self._replace(f"its pipe broke ({e.strerror or e})")

    def close(self) -> None:
        """At the daemon's end: the guard kills what is left (nothing, after a clean stop) and exits."""
        self._closing = True
        if self in procs.WATCH:
            procs.WATCH.remove(self)
        self._unwatch_exit()
        if self.proc is not None:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
            self._fd = -1
