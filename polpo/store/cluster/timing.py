"""The cluster's clocks, as fractions of the lease, and why they nest (docs/DESIGN.md, "Fencing").

A node renews its heartbeat every ``RENEW`` of the lease and, by its own clock, stops its runs and leaves once no
renewal it *sent* succeeded for ``SELF_STOP`` of the lease: its lease (counted by the database from a moment after
that send) cannot have run out yet. Its guard process (:mod:`polpo.tools.guard`) kills the agents' process groups
when the daemon's beat stops for ``GUARD_DEADLINE`` of the lease (a paused daemon), or at once when the daemon
dies. A taker treats a node as dead only after ``TAKE_AFTER`` leases without a heartbeat: the lease plus a margin
that covers the guard's deadline after the last beat (a beat follows every renewal within ``RENEW``)::

    last renewal + RENEW + GUARD_DEADLINE + guard's poll + its gather  <  last renewal + TAKE_AFTER
                                                                     (1/6 + 1/2 + 1/12 + 1/20 < 3/2)

(the gather: a guard sleeps a tenth of its deadline at most after each read, :func:`polpo.tools.guard.gather_for`).

Time is read with CLOCK_BOOTTIME, which keeps counting while the machine sleeps (a laptop lid): a node that wakes
sees at once how long it was away.
"""

from __future__ import annotations

import time

__all__ = ["GUARD_DEADLINE", "GUARD_POLL", "RENEW", "SELF_STOP", "TAKE_AFTER", "must_stop", "now", "stale"]

RENEW = 1 / 6  # heartbeat and guard beat period
SELF_STOP = 2 / 3  # no renewal for this long: the node stops its runs and leaves
GUARD_DEADLINE = 1 / 2  # no beat for this long: the guard kills the agents
GUARD_POLL = 1 / 12  # how often the guard looks at its deadline
TAKE_AFTER = 3 / 2  # a taker's wait after the last heartbeat: the lease plus half a lease


def now() -> float:
    """Seconds on a clock that never goes back and keeps counting through suspend."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def stale(last_renewal_sent: float, at: float, lease: float) -> bool:
    """Has this node gone too long without a renewal to act on its lease (pure)?"""
    return at - last_renewal_sent >= SELF_STOP * lease


def must_stop(renewed: float, beaten: float, at: float, lease: float) -> str | None:
    """Why this node must stop acting now, by its own clock (pure); None while it may act.

    ``renewed``: when the last successful heartbeat was sent; ``beaten``: when the daemon last beat its guard. A
    gap in the beats longer than the guard's deadline means the daemon did not run (paused) long enough for its
    guard to kill its agents: their ends must not be recorded as failures, so the node stops. The guard's own gap
    is never longer than the daemon's (it hears a beat after it is sent), and a daemon that sees the gap stops
    instead of beating, so whenever the guard has killed, this says stop."""
    if stale(renewed, at, lease):
        return (f"no heartbeat renewed for {at - renewed:.1f} s of a {lease:g} s lease; this node stops its runs "
                "before the lease can run out")
    if at - beaten > GUARD_DEADLINE * lease:
        return (f"this daemon did not run for {at - beaten:.1f} s (paused?) and its guard may have killed its "
                "agents; it stops and lets the other nodes take its tasks over")
    return None
