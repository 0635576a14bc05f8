"""The claim queue's writes that ride in a store transaction: an offer, the end of a claim, a request to stop.

They are not part of the backend-neutral :class:`~polpo.store.tx.Tx`, its rows or its SQL: the tables are declared
here, with their statements (:attr:`polpo.store.rows.Table.write`), and a ``Tx`` carries their rows as it carries
any other (:meth:`~polpo.store.tx.Tx.put`), so each stays atomic with the state that causes it: an offer with the
transition that made its task ready, a stop request with the leader's decision, the end of a claim queued after
the turn's last state. The PostgreSQL writer runs their statements like any other; the in-memory store hands
their rows to the owner of ``claims`` (:class:`polpo.store.memory_claims.ClaimTable`), which applies the same rules.
A SQLite daemon is a one-node cluster whose source never writes them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from polpo.model.records import Mission, Task
from polpo.store.rows import Row, Table
from polpo.store.sql import insert, marks
from polpo.store.tx import Tx

__all__ = ["CLAIMS_CHANNEL", "DROPS", "OFFERS", "REQUEUES", "STOPS", "end", "offer", "offer_row", "stop"]

CLAIMS_CHANNEL = "polpo_claims"  # told at the commit of an offer or a claim given back: idle nodes claim at once


@functools.cache
def _offer_sql(ph: str) -> str:  # offered once: an offer never takes a claim back from the node holding it
    return f"{insert(OFFERS, ph)} ON CONFLICT(task_id) DO NOTHING"


def _offers(rows: Sequence[Row], ph: str) -> tuple[str, Sequence[Row]]:
    return _offer_sql(ph), rows


def _stops(rows: Sequence[Row], ph: str) -> tuple[str, Sequence[Row]]:
    stop_, tid = marks(2, ph)
    return f"UPDATE claims SET stop={stop_} WHERE task_id={tid} AND node IS NOT NULL", [(r[1], r[0]) for r in rows]


def _held(ph: str) -> str:  # only the holder (node and incarnation) ends its claim
    tid, node, inc = marks(3, ph)
    return f"task_id={tid} AND node={node} AND incarnation={inc}"


def _requeues(rows: Sequence[Row], ph: str) -> tuple[str, Sequence[Row]]:
    return f"UPDATE claims SET node=NULL, incarnation=NULL, claimed_at=NULL, stop=NULL WHERE {_held(ph)}", rows


def _drops(rows: Sequence[Row], ph: str) -> tuple[str, Sequence[Row]]:
    return f"DELETE FROM claims WHERE {_held(ph)}", rows


OFFERS = Table("claims", ("task_id", "mission_id", "home", "prio", "mseq", "idx", "agent_key", "agent_limit",
                          "mission_limit"), ("task_id",), write=_offers, notify=CLAIMS_CHANNEL)
"""A ready task offered to the cluster's nodes (inserted if absent)."""
STOPS = Table("claims", ("task_id", "stop"), ("task_id",), write=_stops)
"""Ask the holder to stop its run (the reason)."""
REQUEUES = Table("claims", ("task_id", "node", "incarnation"), ("task_id",), write=_requeues, notify=CLAIMS_CHANNEL)
"""The holder's turn is over and the task is ready again: back to the queue."""
DROPS = Table("claims", ("task_id", "node", "incarnation"), ("task_id",), write=_drops)
"""The holder's turn is over for good (done, failed, waiting for a person): the claim goes."""


def offer_row(task: Task, m: Mission, agent_key: str, agent_limit: int | None) -> Row:
    """The row of :data:`OFFERS` for ``task``: its place in the queue and the limits it counts against."""
    return (task.id, m.id, m.home, float(task.priority), m.seq, task.idx, agent_key, agent_limit,
            m.spec.settings.max_concurrency)


def offer(tx: Tx, row: Row) -> Tx:
    """``tx`` also offers a task (:func:`offer_row`) to the cluster's queue."""
    return tx.put(OFFERS, row)


def end(tx: Tx, row: Row, *, requeue: bool) -> Tx:
    """``tx`` also ends a claim (``row``: task, node, incarnation — the queue's ``end_row``): back to the queue
    (``requeue``) or gone."""
    return tx.put(REQUEUES if requeue else DROPS, row)


def stop(tx: Tx, task_id: str, reason: str) -> Tx:
    """``tx`` also asks the node holding ``task_id`` to stop its run."""
    return tx.put(STOPS, (task_id, reason))
