"""Fencing: a cluster node writes only while the database says it holds its lease (and, as leader, its term).

The rules (docs/DESIGN.md, "Fencing"):

* every transaction a node commits (the writer's batches, claims, take-overs, ends of claims) first runs
  ``polpo_fence(...)``, which locks the node's own ``nodes`` row ``FOR KEY SHARE`` (its heartbeat UPDATE does not
  wait for it; a taker's ``FOR UPDATE`` does) only if its incarnation is still
  there and its heartbeat is younger than the lease *by the database's clock*; a leader also checks that the
  ``leader`` row still names it, in the term it was elected for. Otherwise the transaction fails with SQLSTATE
  ``PLF01`` (lease) or ``PLF02`` (leadership) and writes nothing;
* a taker fences a dead node before it takes its claims, in the same transaction: it locks that node's row
  ``FOR UPDATE`` (waiting for any batch of the node still in flight) and changes its incarnation, so no later
  batch or heartbeat of that incarnation can succeed;
* a refused write means "this node lost its tasks": the node stops writing at once (:class:`Fenced`, a kind of
  :class:`StoreLost`, which the engine treats as the end of a run, never as its failure), kills its agents and
  leaves (exit 1; a supervisor starts it again as a new incarnation). A write refused for the leadership alone
  (``PLF02``) is a deposition, not a fence: the node stops leading (its decisions stop at once), and the
  transaction begins again under its lease alone — without the leader's decisions it had queued (transactions
  marked :meth:`~polpo.store.tx.Tx.decided`, written only while their term lasts): the next leader settles
  from the store.

A transaction left open by a node the network cut off (its session idle in the middle of it, holding these row
locks and maybe the event clock's) would make every taker wait until TCP gives up, hours behind a dead NAT: every
session of a cluster node asks the server to end it once it has been idle in a transaction for
:func:`idle_in_transaction` (:func:`session_settings`).

SQL text, error checks and the fenced BEGIN: no asyncpg import (the CLI and SQLite daemons never load it).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from polpo.store.identity import StoreLost

log = logging.getLogger("polpo.cluster")

__all__ = ["FENCE_FUNCTION", "LEADER_WRITES_KEY", "Deposed", "Fence", "Fenced", "fenced_reason",
           "fenced_transaction", "idle_in_transaction", "session_settings"]

LEADER_WRITES_KEY = 0x706F6C706F + 2  # shared by a leader's transactions; a new leader waits for them once
_SQLSTATES = {"PLF01": "lease", "PLF02": "leadership"}
IDLE_IN_TRANSACTION_MAX = 5.0  # seconds: a healthy transaction idles for milliseconds between its statements
ROLLBACK_WITHIN = 2.0  # seconds a ROLLBACK after an error may take

FENCE_FUNCTION = f"""
CREATE FUNCTION polpo_fence(p_node text, p_incarnation text, p_lease double precision, p_term bigint)
RETURNS void LANGUAGE plpgsql AS $fence$
BEGIN
    PERFORM 1 FROM nodes WHERE name = p_node AND incarnation = p_incarnation
        AND clock_timestamp() - heartbeat_at < make_interval(secs => p_lease) FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'node % (incarnation %) no longer holds its lease: its tasks are being taken over',
            p_node, p_incarnation USING ERRCODE = 'PLF01';
    END IF;
    IF p_term IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock_shared({LEADER_WRITES_KEY});
        IF NOT EXISTS (SELECT 1 FROM leader WHERE node = p_node AND incarnation = p_incarnation
                       AND term = p_term) THEN
            RAISE EXCEPTION 'node % no longer leads: term % has ended (another node was elected)',
                p_node, p_term USING ERRCODE = 'PLF02';
        END IF;
    END IF;
END
$fence$;
"""


def idle_in_transaction(lease: float) -> float:
    """Seconds a cluster node's session may stay idle inside a transaction before the server ends it (pure).

    A taker, a new leader and every node's next event number wait for the locks such a transaction holds. polpo
    sends a transaction's statements back to back, so one idle that long belongs to a node cut off from the server
    or stalled past its guard's deadline (half a lease, :mod:`polpo.store.cluster.timing`), which stops by its
    own clock anyway. Capped: even a long lease must not let a cut-off node stall everyone's writes for long."""
    return min(lease / 2, IDLE_IN_TRANSACTION_MAX)


def session_settings(lease: float) -> dict[str, str]:
    """The server settings every connection of a cluster node starts with (asyncpg's ``server_settings``)."""
    return {"idle_in_transaction_session_timeout": str(max(1, round(idle_in_transaction(lease) * 1000)))}


class Fenced(StoreLost):
    """This node may no longer write: its lease (or its leadership) is gone and others take its work over."""


class Deposed(Exception):
    """The database refused a leader's write for its leadership alone (``PLF02``, the lease still holds): the writer
    drops the batch's leader decisions (:meth:`polpo.store.tx.Tx.decided`) and writes the rest under the lease."""


def fenced_reason(e: BaseException) -> str | None:
    """The database's refusal of a fenced transaction, in words; None for any other error."""
    if getattr(e, "sqlstate", None) in _SQLSTATES:
        return str(getattr(e, "message", None) or e)
    return None


def _literal(s: str) -> str:
    """A string constant for the simple-query protocol (E'' syntax: independent of standard_conforming_strings)."""
    if "\x00" in s:
        raise ValueError("a NUL byte cannot be sent to PostgreSQL")
    return "E'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass
class Fence:
    """One node's fencing token (name, incarnation, lease, and its term once it leads) and its state here:
    ``fenced`` once the database (or this node's own clock) said it lost its lease."""

    node: str
    incarnation: str
    lease: float
    leader_term: int | None = None
    fenced: str | None = None
    on_fenced: list[Callable[[str], None]] = field(default_factory=list)
    local: Callable[[], str | None] | None = None  # this node's own clock's verdict (Membership.why_not)
    left: bool = False  # this node left the cluster on a clean stop: a later refusal is its own doing

    def ensure(self) -> None:
        """Before a transaction: raise :class:`Fenced` if this node is fenced, or its own clock says it must stop
        (a short pause the database cannot see may still have let its guard kill its agents)."""
        if self.fenced is None and self.local is not None and (why := self.local()) is not None:
            self.trip(why)
        if self.fenced is not None:
            if self.left:
                log.warning("a write after this node left the cluster was not made (a stop step came late)")
            raise Fenced(self.fenced)

    def call(self, term: int | None = None) -> str:
        """The fence as one statement with its values inlined (so it can share a round trip with BEGIN); as the
        leader in ``term``, if given."""
        leader = "NULL" if term is None else f"{int(term)}::int8"
        return (f"SELECT polpo_fence({_literal(self.node)}, {_literal(self.incarnation)}, "
                f"{float(self.lease)!r}::float8, {leader})")

    def trip(self, reason: str) -> Fenced:
        """Record that this node is fenced (first reason wins), tell the listeners once; the error to raise.
        After :meth:`leave` nobody is told: the row is gone because this node deleted it, not because it lost its
        lease, and a clean stop must not turn into a lost node's exit (nemesis seed 12466)."""
        if self.fenced is None:
            self.fenced = reason
            if not self.left:
                for fn in self.on_fenced:
                    fn(reason)
        return Fenced(self.fenced)

    def leave(self) -> None:
        """A clean stop is about to delete this node's row: from now on every write is refused here."""
        self.left = True
        self.trip(f"node {self.node!r} left the cluster on a clean stop: nothing more is written")

    async def begin(self, conn: Any, *, deposed: bool = False) -> None:
        """BEGIN a transaction on ``conn`` that goes on only while this node holds its lease, in one round trip
        (simple-query protocol: two statements); :class:`Fenced` when it does not (the transaction is gone).
        ``deposed``: a refusal for the leadership alone raises :class:`Deposed` (the store's writer, whose
        batch may hold decisions of the term that ended) instead of beginning again at once."""
        self.ensure()
        while True:
            term = self.leader_term
            try:
                await conn.execute(f"BEGIN; {self.call(term)}")
                return
            except BaseException as e:
                await _rollback(conn)
                if isinstance(e, Exception) and (why := fenced_reason(e)) is not None:
                    if getattr(e, "sqlstate", None) == "PLF02":
                        # its term ended but the lease holds: this node no longer leads (Leadership deposes
                        # it), and its own turns go on; the BEGIN is tried again under its lease alone (another
                        # transaction refused at the same time may have said so first)
                        if self.leader_term == term:
                            log.warning("%s; writing on under this node's lease alone", why)
                            self.leader_term = None
                        if deposed:
                            raise Deposed(why) from None
                        continue
                    raise self.trip(why) from None
                raise


@contextlib.asynccontextmanager
async def fenced_transaction(conn: Any, fence: Fence | None) -> AsyncIterator[None]:
    """A transaction on ``conn``, fenced when ``fence`` is given; committed at the end, rolled back on error."""
    if fence is None:
        await conn.execute("BEGIN")
    else:
        await fence.begin(conn)
    try:
        yield
    except BaseException:
        await _rollback(conn)
        raise
    await conn.execute("COMMIT")


async def _rollback(conn: Any) -> None:
    """ROLLBACK even when cancelled, but never for longer than :data:`ROLLBACK_WITHIN` (a half-open network
    would leave it waiting for hours; the server rolls back a transaction whose session ends anyway)."""
    with anyio.CancelScope(shield=True, deadline=anyio.current_time() + ROLLBACK_WITHIN), \
            contextlib.suppress(Exception):
        await conn.execute("ROLLBACK")
