"""Fencing: a cluster node writes only while the database says it holds its lease (and, as leader, its lock).

The rules (docs/DESIGN.md, "Fencing"):

* every transaction a node commits (the writer's batches, claims, take-overs, ends of claims) first runs
  ``polpo_fence(...)``, which locks the node's own ``nodes`` row ``FOR KEY SHARE`` (its heartbeat UPDATE does not
  wait for it; a taker's ``FOR UPDATE`` does) only if its incarnation is still
  there and its heartbeat is younger than the lease *by the database's clock*; a leader also checks that its
  advisory lock is still held by its lock connection. Otherwise the transaction fails with SQLSTATE ``PLF01``
  (lease) or ``PLF02`` (leadership) and writes nothing;
* a taker fences a dead node before it takes its claims, in the same transaction: it locks that node's row
  ``FOR UPDATE`` (waiting for any batch of the node still in flight) and changes its incarnation, so no later
  batch or heartbeat of that incarnation can succeed;
* a refused write means "this node lost its tasks": the node stops writing at once (:class:`Fenced`, a kind of
  :class:`StoreLost`, which the engine treats as the end of a run, never as its failure), kills its agents and
  leaves (exit 1; a supervisor starts it again as a new incarnation). A write refused for the leader's lock
  alone (``PLF02``) is a deposition, not a fence: the node stops leading (its decisions stop at once), and the
  transaction begins again under its lease alone — without the leader's decisions it had queued (transactions
  marked :meth:`~polpo.store.tx.Tx.decided`, written only while their term lasts): the next leader settles
  from the store.

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

__all__ = ["FENCE_FUNCTION", "LEADER_KEY", "LEADER_WRITES_KEY", "Deposed", "Fence", "Fenced", "fenced_reason",
           "fenced_transaction"]

LEADER_KEY = 0x706F6C706F + 1  # the leader's session advisory lock (the migration lock is 0x706F6C706F)
LEADER_WRITES_KEY = 0x706F6C706F + 2  # shared by a leader's transactions; a new leader waits for them once
_SQLSTATES = {"PLF01": "lease", "PLF02": "leadership"}
ROLLBACK_WITHIN = 2.0  # seconds a ROLLBACK after an error may take

FENCE_FUNCTION = f"""
CREATE FUNCTION polpo_fence(p_node text, p_incarnation text, p_lease double precision, p_leader integer)
RETURNS void LANGUAGE plpgsql AS $fence$
BEGIN
    PERFORM 1 FROM nodes WHERE name = p_node AND incarnation = p_incarnation
        AND clock_timestamp() - heartbeat_at < make_interval(secs => p_lease) FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'node % (incarnation %) no longer holds its lease: its tasks are being taken over',
            p_node, p_incarnation USING ERRCODE = 'PLF01';
    END IF;
    IF p_leader IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock_shared({LEADER_WRITES_KEY});
        IF NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = p_leader AND granted
                       AND classid = {LEADER_KEY >> 32} AND objid = {LEADER_KEY & 0xFFFFFFFF}) THEN
            RAISE EXCEPTION 'node % no longer leads: the connection holding its leader lock is gone',
                p_node USING ERRCODE = 'PLF02';
        END IF;
    END IF;
END
$fence$;
"""


class Fenced(StoreLost):
    """This node may no longer write: its lease (or its leadership) is gone and others take its work over."""


class Deposed(Exception):
    """The database refused a leader's write for its lock alone (``PLF02``, the lease still holds): the writer
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
    """One node's fencing token (name, incarnation, lease, the leader lock's backend once it leads) and its
    state here: ``fenced`` once the database (or this node's own clock) said it lost its lease."""

    node: str
    incarnation: str
    lease: float
    leader_pid: int | None = None
    fenced: str | None = None
    on_fenced: list[Callable[[str], None]] = field(default_factory=list)
    local: Callable[[], str | None] | None = None  # this node's own clock's verdict (Membership.why_not)

    def ensure(self) -> None:
        """Before a transaction: raise :class:`Fenced` if this node is fenced, or its own clock says it must stop
        (a short pause the database cannot see may still have let its guard kill its agents)."""
        if self.fenced is None and self.local is not None and (why := self.local()) is not None:
            self.trip(why)
        if self.fenced is not None:
            raise Fenced(self.fenced)

    def call(self) -> str:
        """The fence as one statement with its values inlined (so it can share a round trip with BEGIN)."""
        leader = "NULL" if self.leader_pid is None else str(int(self.leader_pid))
        return (f"SELECT polpo_fence({_literal(self.node)}, {_literal(self.incarnation)}, "
                f"{float(self.lease)!r}::float8, {leader})")

    def trip(self, reason: str) -> Fenced:
        """Record that this node is fenced (first reason wins), tell the listeners once; the error to raise."""
        if self.fenced is None:
            self.fenced = reason
            for fn in self.on_fenced:
                fn(reason)
        return Fenced(self.fenced)

    async def begin(self, conn: Any, *, deposed: bool = False) -> None:
        """BEGIN a transaction on ``conn`` that goes on only while this node holds its lease, in one round trip
        (simple-query protocol: two statements); :class:`Fenced` when it does not (the transaction is gone).
        ``deposed``: a refusal for the leader's lock alone raises :class:`Deposed` (the store's writer, whose
        batch may hold decisions of the term that ended) instead of beginning again at once."""
        self.ensure()
        while True:
            try:
                await conn.execute(f"BEGIN; {self.call()}")
                return
            except BaseException as e:
                await _rollback(conn)
                if isinstance(e, Exception) and (why := fenced_reason(e)) is not None:
                    if getattr(e, "sqlstate", None) == "PLF02" and self.leader_pid is not None:
                        # the lock is gone but the lease holds: this node no longer leads (Leadership deposes
                        # it), and its own turns go on; the BEGIN is tried again under its lease alone
                        log.warning("%s; writing on under this node's lease alone", why)
                        self.leader_pid = None
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
