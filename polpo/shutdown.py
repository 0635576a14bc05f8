"""The daemon's stop: every step under a deadline, and a last resort that ends the process.

A stop must end even when what a step waits for never answers. A PostgreSQL whose network is half-open (a cut
cable, a dead NAT: no FIN, no RST) leaves a read on its socket waiting until the kernel gives up, hours later;
a node fenced by its own clock then stayed alive, half stopped, until the network healed. So every step of the
stop after the runs have stopped (the shutdown event, the follower's last read, leaving the cluster, the
notifier, the API, the readers, the store's pool) gets at most :data:`STEP` seconds and together at most
:data:`BUDGET` (on a cluster node, half its lease and three leases): a step whose time is up is abandoned with a warning naming it, and the next one goes on (what
it would have written, the next start recovers from the store, as after a crash) with :data:`AFTER_ABANDONED`
seconds at most, since what did not answer will most likely not answer the next step either.

:class:`LastResort` covers a wait no step bounds (a shielded clean-up, a blocking call): armed when the stop
begins, a timer thread ends the process (exit 1, one line saying why) if the stop has not ended by then. Time
is the injected clock's monotonic seconds for the steps; the last resort's timer is a thread's own, and counts
only the time the process ran (a SIGSTOP in the middle of a stop does not use it up).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable

import anyio

from polpo.clock import Clock
from polpo.config import Config

log = logging.getLogger("polpo.daemon")

__all__ = ["BUDGET", "STEP", "LastResort", "StopSteps"]

STEP = 5.0  # seconds: the most one step of the stop may take
BUDGET = 12.0  # seconds: the most all of them may take together (the runs' own grace comes on top)
AFTER_ABANDONED = 1.0  # seconds for each later step once one was abandoned (what did not answer still won't)
MARGIN = 5.0  # seconds the last resort waits past the budget before it ends the process


class StopSteps:
    """The steps of one stop, sharing one budget (see the module docstring)."""

    def __init__(self, clock: Clock, budget: float = BUDGET, step: float = STEP) -> None:
        self.clock = clock
        self.step_max = step
        self.budget = budget
        self.ends_at = clock.monotonic() + budget
        self.abandoned: list[str] = []  # the steps whose time ran out, in order

    @classmethod
    def of(cls, cfg: Config, clock: Clock) -> StopSteps:
        """A cluster node's steps get at most half its lease each, three leases in all: a database that has not
        answered for that long is one this node is being fenced from anyway (its heartbeat goes over it too)."""
        if cfg.store.url is None:
            return cls(clock)
        lease = cfg.store.lease.total_seconds()
        return cls(clock, budget=min(BUDGET, 3 * lease), step=min(STEP, lease / 2))

    def left(self) -> float:
        return max(0.0, self.ends_at - self.clock.monotonic())

    async def step(self, what: str, fn: Callable[[], Awaitable[object]], *, extra: float = 0.0) -> bool:
        """Run ``fn`` for at most :data:`STEP` seconds (plus ``extra``: a grace the step itself keeps), within
        what is left of the budget; False (and a warning) when its time ran out or it failed."""
        most = self.step_max if not self.abandoned else AFTER_ABANDONED
        with anyio.move_on_after(min(most, self.left()) + extra) as scope:
            try:
                await fn()
            except Exception as e:  # (the database went away meanwhile…): the stop goes on
                log.warning("stopping: %s failed (%s: %s); going on without it", what, type(e).__name__, e)
                return False
        if scope.cancelled_caught:
            self.abandoned.append(what)
            log.warning("stopping: %s did not finish in time (a database or a network that does not answer?); "
                        "going on without it", what)
            return False
        return True


TICK = 0.25  # seconds between the last resort's looks at the time
SUSPENDED = 2 * TICK  # the most one look counts: a longer gap is time the process was not running (SIGSTOP)


class LastResort:
    """A timer thread that ends the process if the stop has not ended when it fires (see the module docstring).

    It counts the time the process ran, not the wall clock's: a node stopped (SIGSTOP, a paused VM) in the middle
    of its stop resumes with its whole margin left, instead of the timer firing the moment it wakes and exiting a
    stop that was about to end well. A look that comes late by more than :data:`SUSPENDED` counts as one tick.
    """

    def __init__(self, on_fire: Callable[[], object] | None = None) -> None:
        self.on_fire = on_fire  # what to do first (kill the agents); the process then exits 1
        self._disarmed: threading.Event | None = None  # the armed timer's own: set when disarmed

    def arm(self, seconds: float, reason: Callable[[], str]) -> None:
        if self._disarmed is None:
            self._disarmed = threading.Event()
            threading.Thread(target=self._watch, args=(seconds, reason, self._disarmed), daemon=True,
                             name="polpo-last-resort").start()

    def disarm(self) -> None:
        if self._disarmed is not None:
            self._disarmed.set()
            self._disarmed = None

    def _watch(self, seconds: float, reason: Callable[[], str], disarmed: threading.Event) -> None:
        ran, last = 0.0, time.monotonic()
        while not disarmed.wait(min(TICK, max(0.0, seconds - ran))):
            now = time.monotonic()
            ran, last = ran + min(now - last, SUSPENDED), now
            if ran >= seconds:
                self._fire(seconds, reason)
                return

    def _fire(self, seconds: float, reason: Callable[[], str]) -> None:
        if self.on_fire is not None:
            self.on_fire()
        print(f"polpo: stopped: {reason()}; the stop did not end within {seconds:g} s (something it waited for "
              "does not answer): exiting without it", file=sys.stderr, flush=True)
        os._exit(1)
