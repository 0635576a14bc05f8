"""SQL text for the tables of :mod:`polpo.store.rows`: idempotent upserts, written once for every backend.

``INSERT … ON CONFLICT (key) DO UPDATE SET col = excluded.col`` is the same in SQLite and PostgreSQL; only the
parameter placeholder differs: ``?`` (SQLite) or ``$`` for PostgreSQL's numbered ``$1, $2, …``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from polpo.store.rows import (
    CLAIM_DROPS,
    CLAIM_OFFERS,
    CLAIM_REQUEUES,
    CLAIM_STOPS,
    COMMANDS_DONE,
    EVENTS,
    Row,
    Table,
)

__all__ = ["insert", "statement", "upsert"]


def _marks(n: int, ph: str) -> list[str]:
    return [f"${i}" for i in range(1, n + 1)] if ph == "$" else [ph] * n


@functools.cache  # the text of a table's statement never changes; it was rebuilt for every batch
def upsert(table: Table, ph: str = "?") -> str:
    updates = ", ".join(f"{c}=excluded.{c}" for c in table.cols if c not in table.key and c not in table.insert_only)
    return (f"INSERT INTO {table.name} ({', '.join(table.cols)}) VALUES ({', '.join(_marks(len(table.cols), ph))}) "
            f"ON CONFLICT({', '.join(table.key)}) DO UPDATE SET {updates}")


@functools.cache
def insert(table: Table, ph: str = "?") -> str:
    return f"INSERT INTO {table.name} ({', '.join(table.cols)}) VALUES ({', '.join(_marks(len(table.cols), ph))})"


def statement(table: Table, rows: Sequence[Row], ph: str = "?") -> tuple[str, Sequence[Row]]:
    """The statement writing rows of ``table`` (tuples in ``table.cols`` order) and its parameter rows."""
    if table is COMMANDS_DONE:  # (id, status, result, handled_at): an update of the row the CLI inserted
        status, result, handled_at, cid = _marks(4, ph)
        return (f"UPDATE commands SET status={status}, result={result}, handled_at={handled_at} WHERE id={cid}",
                [(r[1], r[2], r[3], r[0]) for r in rows])
    if table is EVENTS:
        return insert(table, ph), rows
    if table is CLAIM_OFFERS:  # offered once: an offer never takes a claim back from the node holding it
        return f"{insert(table, ph)} ON CONFLICT(task_id) DO NOTHING", rows
    if table is CLAIM_STOPS:
        stop, tid = _marks(2, ph)
        return (f"UPDATE claims SET stop={stop} WHERE task_id={tid} AND node IS NOT NULL",
                [(r[1], r[0]) for r in rows])
    if table is CLAIM_REQUEUES or table is CLAIM_DROPS:  # only the holder ends its claim
        tid, node, inc = _marks(3, ph)
        held = f"task_id={tid} AND node={node} AND incarnation={inc}"
        if table is CLAIM_DROPS:
            return f"DELETE FROM claims WHERE {held}", rows
        return (f"UPDATE claims SET node=NULL, incarnation=NULL, claimed_at=NULL, stop=NULL WHERE {held}", rows)
    return upsert(table, ph), rows
