"""Saying that work paused for a passing fault (:mod:`polpo.fsfaults`) and that it resumed: one warning line in
the daemon's log and one ``fault:paused`` / ``fault:resumed`` event each, from every path that waits (the intake,
admission, a task's workspace or worktree). :func:`retrying` is the wait itself for work that is one call."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from polpo.clock import Clock
from polpo.events.catalog import FaultPaused, FaultResumed
from polpo.fsfaults import Pause, errno_name, passing
from polpo.store.protocol import Store

log = logging.getLogger("polpo.faults")

__all__ = ["FaultNotes", "retrying"]

T = TypeVar("T")


class FaultNotes:
    """The log line and the event for a pause and for its end."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def pause(self) -> Pause:
        return Pause(self.clock.monotonic)

    def paused(self, work: str, path: str, code: int, exc: BaseException, delay: float, *,
               mission_id: str | None = None, task_id: str | None = None) -> None:
        error = f"{errno_name(code)} ({exc})"
        log.warning("%s paused on %s: %s; nothing is rejected or failed for it: polpo tries again in %.1f s "
                    "(free space, make the folder writable or fix its permissions)", work, path, error, delay)
        self.store.submit(self.store.tx().event(FaultPaused(work=work, path=path, error=error[:500],
                                                            retry_in=round(delay, 1)),
                                                mission_id=mission_id, task_id=task_id))

    def still(self, work: str, path: str, pause: Pause) -> None:
        if pause.remind():
            log.warning("%s still paused on %s after %.0f s (%d tries)", work, path, pause.waited(), pause.tries)

    def resumed(self, work: str, path: str, pause: Pause, *, mission_id: str | None = None,
                task_id: str | None = None) -> None:
        tries = pause.tries
        waited = pause.done()
        if waited is None:
            return
        log.warning("%s resumed on %s after %.1f s", work, path, waited)
        self.store.submit(self.store.tx().event(FaultResumed(work=work, path=path, waited=round(waited, 1),
                                                             tries=tries),
                                                mission_id=mission_id, task_id=task_id))


async def retrying(notes: FaultNotes, work: str, path: str, op: Callable[[], Awaitable[T]], *,
                   mission_id: str | None = None, task_id: str | None = None) -> T:
    """``op()``, tried again after each passing fault (with the backoff) until it goes through; any other
    error is raised. A cancel (a stop, a shutdown) ends the wait."""
    pause = notes.pause()
    while True:
        try:
            out = await op()
        except Exception as exc:
            code = passing(exc)
            if code is None:
                raise
            delay = pause.failed()
            if pause.tries == 1:
                notes.paused(work, path, code, exc, delay, mission_id=mission_id, task_id=task_id)
            else:
                notes.still(work, path, pause)
            await anyio.sleep(delay)
            continue
        notes.resumed(work, path, pause, mission_id=mission_id, task_id=task_id)
        return out
