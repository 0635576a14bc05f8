"""The periodic SLA check: an APScheduler interval job that calls the engine's check with the clock's time.

The monitor knows nothing about missions or tasks: each tick reads the injected clock and awaits
``check(now)``, and the engine decides which open entities have deadlines and records the marks
(:mod:`polpo.sla.deadlines`). So the check is awaited (Polpo fired it and forgot), never overlaps
itself (``max_instances=1``; a late run is coalesced into one), and runs even when no task is active.

Tests drive :meth:`SlaMonitor.tick` directly with a ``FakeClock``; the scheduler only decides *when*.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import anyio
import anyio.lowlevel
from apscheduler.events import EVENT_JOB_MAX_INSTANCES
from apscheduler.executors.asyncio import AsyncIOExecutor
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from polpo.clock import Clock

__all__ = ["Check", "SlaMonitor", "Timers"]

log = logging.getLogger("polpo.sla")

Check = Callable[[datetime], Awaitable[None]]

_JOB_ID = "polpo-sla-check"


class SlaMonitor:
    """Runs ``check(clock.now())`` every ``interval``; start inside the event loop, ``await shutdown()``."""

    def __init__(self, check: Check, clock: Clock, interval: float | timedelta, *,
                 run_at_start: bool = True) -> None:
        seconds = interval.total_seconds() if isinstance(interval, timedelta) else float(interval)
        if seconds <= 0:
            raise ValueError("the SLA check interval must be greater than zero")
        self._check = check
        self._clock = clock
        self._interval = seconds
        self._run_at_start = run_at_start  # first check right away: deadlines may have passed while down
        self._scheduler: AsyncIOScheduler | None = None
        self._idle = anyio.Event()
        self._idle.set()
        self.ticks = 0  # completed ticks, for status and tests
        self.errors = 0  # ticks whose check raised
        self.skipped = 0  # ticks skipped because the previous check was still running

    @property
    def running(self) -> bool:
        return self._scheduler is not None

    def start(self) -> None:
        """Schedule the interval job on the running asyncio loop (call from async code)."""
        if self._scheduler is not None:
            return
        # its executor and trigger as objects, imported with this module: by name, they are an entry-point lookup
        # and an import when the daemon starts, which a daemon out of file descriptors would fail (and end on)
        scheduler = AsyncIOScheduler(timezone=UTC, executors={"default": AsyncIOExecutor()})
        first = datetime.now(UTC) if self._run_at_start else None
        scheduler.add_job(self.tick, IntervalTrigger(seconds=self._interval, timezone=UTC), id=_JOB_ID,
                          max_instances=1, coalesce=True, misfire_grace_time=None,
                          **({"next_run_time": first} if first is not None else {}))
        scheduler.add_listener(self._skipped, EVENT_JOB_MAX_INSTANCES)
        scheduler.start()
        self._scheduler = scheduler

    def _skipped(self, _event: object) -> None:
        self.skipped += 1
        if self.skipped == 1 or self.skipped % 100 == 0:
            log.warning("an SLA check is still running after %g s; %d tick(s) skipped", self._interval,
                        self.skipped)

    async def shutdown(self, grace: float = 5.0) -> None:
        """Stop scheduling; let a check in flight finish (up to ``grace`` seconds, then it is cancelled)."""
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is None:
            return
        scheduler.pause()
        with anyio.move_on_after(grace):
            await self._idle.wait()
        scheduler.shutdown(wait=False)
        await anyio.lowlevel.checkpoint()  # AsyncIOScheduler.shutdown runs via call_soon: let it run now

    async def tick(self) -> None:
        """One check at the clock's current time; errors are logged, never raised into the scheduler."""
        self._idle = anyio.Event()
        try:
            await self._check(self._clock.now())
        except Exception:
            self.errors += 1
            log.exception("SLA check failed; the next one runs in %g s", self._interval)
        finally:
            self.ticks += 1
            self._idle.set()


class Timers:
    """The leader's interval jobs (the SLA check, the attention digest), started and stopped together."""

    def __init__(self, *jobs: SlaMonitor) -> None:
        self.jobs = jobs

    def start(self) -> None:
        for job in self.jobs:
            job.start()

    async def shutdown(self, grace: float = 5.0) -> None:
        for job in self.jobs:
            await job.shutdown(grace)
