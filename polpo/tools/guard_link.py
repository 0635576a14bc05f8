"""The daemon's side of its guard (:mod:`polpo.tools.guard`): starts it, tells it each process group that
:func:`polpo.tools.procs.run_process` starts and ends, and beats. ``may_start`` is the node's own check that it may
still act on its lease: a program started when it may not is killed at once (the run ends as if killed)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable

from polpo.tools import procs
from polpo.tools.proctable import process_start_ticks

log = logging.getLogger("polpo.guard")

__all__ = ["GuardLink"]


class GuardLink:
    def __init__(self, deadline: float, may_start: Callable[[], bool] = lambda: True) -> None:
        self.deadline = deadline
        self.may_start = may_start
        self.proc: subprocess.Popen[bytes] | None = None
        self._fd = -1
        self._broken = False

    def start(self) -> None:
        """Start the guard and watch every process group from now on."""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "polpo.tools.guard", repr(self.deadline), str(os.getpid())],
            stdin=subprocess.PIPE, start_new_session=True, close_fds=True)
        assert self.proc.stdin is not None
        self._fd = self.proc.stdin.fileno()
        procs.WATCH.append(self)

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def beat(self) -> None:
        self._send(b".\n")

    def started(self, pgid: int) -> bool:
        if not self.may_start():
            return False
        ticks = process_start_ticks(pgid)
        self._send(f"+{pgid} {'-' if ticks is None else ticks}\n".encode())
        return True

    def ended(self, pgid: int) -> None:
        self._send(f"-{pgid}\n".encode())

    def _send(self, line: bytes) -> None:
        if self._fd < 0 or self._broken:
            return
        try:
            os.write(self._fd, line)  # a few bytes: atomic on a pipe, and the guard reads all the time
        except OSError as e:
            self._broken = True
            log.error("the guard process is gone (%s): agents of this node are not guarded against a pause of the "
                      "daemon until it restarts", e)

    def close(self) -> None:
        """At the daemon's end: the guard kills what is left (nothing, after a clean stop) and exits."""
        if self in procs.WATCH:
            procs.WATCH.remove(self)
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
