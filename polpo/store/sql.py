"""SQL text for the tables of :mod:`polpo.store.rows`: idempotent upserts, written once for every backend.

``INSERT … ON CONFLICT (key) DO UPDATE SET col = excluded.col`` is the same in SQLite and PostgreSQL; only the
parameter placeholder differs: ``?`` (SQLite) or ``$`` for PostgreSQL's numbered ``$1, $2, …``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from polpo.store.rows import COMMANDS_DONE, EVENTS, Row, Table

__all__ = ["insert", "marks", "statement", "upsert"]


def marks(n: int, ph: str) -> list[str]:
    """``n`` parameter placeholders: ``?`` each (SQLite) or ``$1 … $n`` (PostgreSQL)."""
    return [f"${i}" for i in range(1, n + 1)] if ph == "$" else [ph] * n


@functools.cache  # the text of a table's statement never changes; it was rebuilt for every batch
def upsert(table: Table, ph: str = "?") -> str:
    updates = ", ".join(f"{c}=excluded.{c}" for c in table.cols if c not in table.key and c not in table.insert_only)
    return (f"INSERT INTO {table.name} ({', '.join(table.cols)}) VALUES ({', '.join(marks(len(table.cols), ph))}) "
            f"ON CONFLICT({', '.join(table.key)}) DO UPDATE SET {updates}")


@functools.cache
def insert(table: Table, ph: str = "?") -> str:
    return f"INSERT INTO {table.name} ({', '.join(table.cols)}) VALUES ({', '.join(marks(len(table.cols), ph))})"


def statement(table: Table, rows: Sequence[Row], ph: str = "?") -> tuple[str, Sequence[Row]]:
    """The statement writing rows of ``table`` (tuples in ``table.cols`` order) and its parameter rows; a table
    another module owns brings its own (:attr:`Table.write`)."""
    if table.write is not None:
        return table.write(rows, ph)
    if table is COMMANDS_DONE:  # (id, status, result, handled_at): an update of the row the CLI inserted
        status, result, handled_at, cid = marks(4, ph)
        return (f"UPDATE commands SET status={status}, result={result}, handled_at={handled_at} WHERE id={cid}",
                [(r[1], r[2], r[3], r[0]) for r in rows])
    if table is EVENTS:
        return insert(table, ph), rows
    return upsert(table, ph), rows
