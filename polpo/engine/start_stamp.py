"""An agent's leader's start time, stamped on its attempt a moment after the spawn, not in it.

The start time (``/proc/PID/stat``) tells the agent's leader from a later process that reused its pid, when a
daemon that crashed looks for its orphans (:mod:`polpo.engine.recovery`). Read right after the spawn, it waited
for the child's exec with the event loop stopped: about 0.4 ms a spawn, 3–5 ms of a 10-task chain
(``scripts/bench_latency.py``). So the attempt is stored running with its pid at once, and the start time
:data:`STAMP_AFTER` seconds later, once the exec is done, while the program still runs and is still unreaped (a
zombie keeps its pid, so the time read is its own). A program that ends sooner needs none: there is nothing left
to find. Until the stamp, the attempt's marker variable (:mod:`polpo.tools.marks`) is what finds its processes.
"""

from __future__ import annotations

import asyncio
import contextlib

from polpo.model.records import Attempt
from polpo.model.status import AttemptStatus
from polpo.store.errors import StoreError
from polpo.store.protocol import Store
from polpo.tools.procs import RUNNING
from polpo.tools.proctable import process_start_ticks

__all__ = ["STAMP_AFTER", "stamp_later"]

STAMP_AFTER = 0.005  # seconds after the spawn: a program's exec is over, and its stat is read at once


def stamp_later(store: Store, attempt: Attempt, pid: int | None) -> None:
    """Stamp the start time of ``attempt``'s program ``pid`` on it in :data:`STAMP_AFTER` seconds (see above)."""
    if pid is not None:
        asyncio.get_running_loop().call_later(STAMP_AFTER, _stamp, store, attempt, pid)


def _stamp(store: Store, attempt: Attempt, pid: int) -> None:
    if attempt.pid != pid or attempt.status is not AttemptStatus.RUNNING or pid not in RUNNING:
        return  # ended (or reaped: its pid may be another process's by now)
    ticks = process_start_ticks(pid)
    if ticks is None:
        return
    attempt.pid_ticks = ticks
    with contextlib.suppress(StoreError):  # a store closing with the daemon: the marker still finds the program
        store.submit(store.tx().attempt(attempt))
