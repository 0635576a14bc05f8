"""How a component that reads or writes the shared database waits out an outage: the same jittered, doubling
backoff as every other passing fault (:class:`polpo.fsfaults.Pause`), one warning line when the outage begins
(and a reminder while it lasts), one when it ends — never a traceback per try.

A database restart is a pause for the whole node: the claimer, the leader's loops, the follower of other nodes'
events and the commands inbox each keep their work and try it again when the server answers, instead of
dropping it or ending the daemon. What counts as an outage is :func:`polpo.store.postgres_faults.is_outage`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from polpo.fsfaults import Pause
from polpo.store.errors import StoreUnavailable
from polpo.store.postgres_faults import is_outage

__all__ = ["OUTAGE_CAP", "OUTAGE_FIRST", "OutageWait"]

OUTAGE_FIRST = 0.5  # seconds before the first new try
OUTAGE_CAP = 5.0  # the longest wait between two tries: work resumes within seconds of the server's return


class OutageWait:
    """One component's wait for the database (``what`` names the work in its log lines)."""

    def __init__(self, what: str, log: logging.Logger, *, first: float = OUTAGE_FIRST, cap: float = OUTAGE_CAP,
                 away: Callable[[BaseException], bool] | None = None) -> None:
        """``away``: what counts as the store away (default: a store's StoreUnavailable — SQLite's full disk or I/O
        error — and PostgreSQL's outages)."""
        self.what = what
        self.log = log
        self.away = away or _away
        self.pause = Pause(time.monotonic, first, cap)

    def failed(self, e: BaseException) -> float | None:
        """The seconds to wait before trying again when ``e`` is an outage (logged once), else None."""
        if not self.away(e):
            return None
        delay = self.pause.failed()
        if self.pause.tries == 1:
            self.log.warning("%s waits for the database (%s: %s); trying again with backoff", self.what,
                             type(e).__name__, e)
        elif self.pause.remind(60.0):
            self.log.warning("%s still waits for the database after %.0f s (%s)", self.what, self.pause.waited(), e)
        return delay

    def ok(self) -> None:
        """The work went through: the outage (if any) is over for this component."""
        waited = self.pause.done()
        if waited is not None:
            self.log.warning("%s resumed after %.1f s without the database", self.what, waited)

    @property
    def waiting(self) -> bool:
        return self.pause.paused


def _away(e: BaseException) -> bool:
    return isinstance(e, StoreUnavailable) or is_outage(e)


class _DriverOutages(logging.Filter):
    """asyncpg's pool logs a traceback each time it cannot restore its connection floor; during an outage that
    is the same news, every second, that polpo's own components already report in one line each."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return exc is None or not is_outage(exc)


class _DriverLeftovers(logging.Filter):
    """asyncpg gives a pooled connection back in a task of its own, shielded from cancellation; when a stop's
    deadline cuts that release short and the database is gone, the task's outage error is reported by asyncio as
    never retrieved, with its traceback (nemesis seed 8603). It is news of the outage the stop already said: one
    line, as a warning."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and is_outage(exc) and "asyncpg" in record.getMessage():
            record.msg, record.args = ("a database connection was not given back to its pool: the database went "
                                       "away meanwhile (%s: %s)", (type(exc).__name__, exc))
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


_FILTER = _DriverOutages()
_LEFTOVERS = _DriverLeftovers()


def quiet_driver_outages() -> None:
    """Keep the driver's per-try outage tracebacks, and those of its releases a stop cut short, out of the daemon's
    log (idempotent)."""
    for name, f in (("asyncpg.pool", _FILTER), ("asyncio", _LEFTOVERS)):
        logger = logging.getLogger(name)
        if f not in logger.filters:
            logger.addFilter(f)
