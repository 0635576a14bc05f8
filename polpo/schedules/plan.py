"""What a schedule does at an instant: which firings are due, which run, which are let go. Pure functions.

The store keeps one instant per schedule, its *cursor*: the newest scheduled instant already dealt with (run,
queued or let go). Every decision is a function of the trigger, the cursor and ``now`` from the injected clock,
so a restart (or a new leader) decides exactly what the last one would have, and nothing is run twice: the
cursor moves in the same transaction as the firing's run and ``schedule:triggered``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from polpo.schedules.triggers import Trigger

__all__ = ["DEFAULT_GRACE", "MAX_CATCH_UP", "MAX_QUEUED", "Action", "CatchUp", "Due", "Overlap", "Plan", "Policy",
           "due", "next_fire", "on_overlap", "plan"]

Overlap = Literal["skip", "queue", "cancel-previous"]  # a run still going when the next firing is due
CatchUp = Literal["none", "one", "all"]  # firings missed while the daemon was down
DEFAULT_GRACE = timedelta(minutes=1)  # misfireGrace: a firing this late is still on time

MAX_CATCH_UP = 100  # catchUp "all": at most this many missed firings run (the newest)
MAX_QUEUED = 10  # overlap "queue": firings waiting for the active run to end, at most
_SCAN = 1000  # trigger steps per pass over missed firings (~50 ms); a longer downtime is jumped over

Action = Literal["start", "skip", "queue", "replace"]


@dataclass(frozen=True)
class Policy:
    overlap: Overlap = "skip"
    catch_up: CatchUp = "one"
    misfire_grace: timedelta = DEFAULT_GRACE


@dataclass(frozen=True)
class Due:
    """Scheduled instants after the cursor, up to now: the newest ``keep`` (oldest first), and how many older
    ones were left out (``dropped``)."""

    instants: tuple[datetime, ...]
    dropped: int = 0


def due(trigger: Trigger, cursor: datetime | None, anchor: datetime, now: datetime,
        keep: int = MAX_CATCH_UP) -> Due:
    """The instants in (cursor, now] — [anchor, now] for a schedule that never fired. A long downtime is skipped
    over in jumps of :data:`_SCAN` steps (the count of what was left out is then a lower bound)."""
    out: deque[datetime] = deque(maxlen=keep)
    dropped = 0
    prev, start = cursor, anchor
    while True:
        first: datetime | None = None
        for _ in range(_SCAN):
            t: datetime | None = trigger.get_next_fire_time(prev, start if prev is None else now)
            if t is None or t > now:
                return Due(tuple(out), dropped)
            if len(out) == keep:
                dropped += 1
            out.append(t)
            first = first or t
            prev = t
        # still behind after _SCAN steps: jump ahead to the last stretch of that length before now
        assert first is not None and prev is not None
        start = max(now - (prev - first), prev + timedelta(microseconds=1))
        prev = None


def next_fire(trigger: Trigger, cursor: datetime | None, anchor: datetime, now: datetime) -> datetime | None:
    """The next firing after what is dealt with (None: the schedule has ended)."""
    t: datetime | None = (trigger.get_next_fire_time(None, anchor) if cursor is None
                          else trigger.get_next_fire_time(cursor, max(now, cursor)))
    return t


@dataclass(frozen=True)
class Plan:
    """``fire``: the instants that run now (oldest first); ``missed``: those let go by the catch-up policy
    (``dropped`` more beyond them); ``cursor``: the newest instant dealt with."""

    fire: tuple[datetime, ...]
    missed: tuple[datetime, ...]
    dropped: int
    cursor: datetime | None


def plan(pending: Due, cursor: datetime | None, now: datetime, policy: Policy) -> Plan:
    """What runs of the due instants: an on-time one (at most ``misfireGrace`` late) always; late ones by
    ``catchUp`` — ``none`` lets them go, ``one`` runs one for all of them, ``all`` runs each."""
    instants = pending.instants
    if not instants:
        return Plan((), (), 0, cursor)
    if policy.catch_up == "all":
        fire: tuple[datetime, ...] = instants
    elif policy.catch_up == "one":
        fire = instants[-1:]
    else:
        fire = tuple(t for t in instants[-1:] if now - t <= policy.misfire_grace)
    missed = tuple(t for t in instants if t not in fire)
    return Plan(fire, missed, pending.dropped, instants[-1])


def on_overlap(policy: Policy, active: bool, queued: int) -> Action:
    """A firing while a run of the mission is still going (``active``): skip it, queue it (while fewer than
    :data:`MAX_QUEUED` wait), or cancel the run and start anew (``replace``)."""
    if not active:
        return "start"
    if policy.overlap == "queue":
        return "queue" if queued < MAX_QUEUED else "skip"
    if policy.overlap == "cancel-previous":
        return "replace"
    return "skip"
