"""The budgets' writes to ``spend``: each call's spend added to what the row holds, never a total written over it.

Several daemons on one PostgreSQL store count into the same rows: the tasks of one mission run on different
nodes, a task retried may run on another node than its first attempt, and every node's calls count in the
agents' and the daemon's day. A node writing its own idea of a total would overwrite the others' (the last
write wins); a node adding what its call spent cannot. So a row of :data:`ADDS` carries a delta: the tokens,
dollars and calls of one call (zero for a row that only marks a crossing), its crossing flags, and whether its
price was known (a row is known only while all of its calls were). A task's budget raised by ``polpo retry
--budget`` is the one value written as it is (:data:`RAISES`); it counts one more raise in the flags above the
two crossing bits (``flags // 4``) and clears the crossings, so they are announced again against the new budget.
A row's crossing flags are OR-ed into the stored ones only under the same count of raises: a node that had not
seen a raise cannot mark the new budget crossed.

The statements are the same text on SQLite and PostgreSQL; the in-memory store applies the same rules
(:class:`SpendTable`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from polpo.store import rows as R
from polpo.store.rows import Row, Table
from polpo.store.sql import insert
from polpo.store.tx import Tx

__all__ = ["ADDS", "RAISE", "RAISES", "SpendTable", "add", "raise_limit"]

_COLS = ("scope", "key", "period", "mission_id", "tokens_in", "tokens_out", "usd", "usd_known", "calls", "flags",
         "limit_usd", "limit_tokens", "updated_at")
_KEY = ("scope", "key", "period")
_SUMMED = ("tokens_in", "tokens_out", "usd", "calls")
RAISE = 4
"""A row's ``flags``: the budget's two crossing bits below it, the count of the task's budget raises above."""


@functools.cache
def _add_sql(ph: str) -> str:
    summed = ", ".join(f"{c}=spend.{c}+excluded.{c}" for c in _SUMMED)
    return (f"{insert(ADDS, ph)} ON CONFLICT(scope, key, period) DO UPDATE SET {summed}, "
            f"usd_known=spend.usd_known*excluded.usd_known, flags=CASE WHEN excluded.flags/{RAISE}=spend.flags/{RAISE} "
            "THEN spend.flags|excluded.flags ELSE spend.flags END, updated_at=excluded.updated_at")


@functools.cache
def _raise_sql(ph: str) -> str:
    return (f"{insert(RAISES, ph)} ON CONFLICT(scope, key, period) DO UPDATE SET limit_usd=excluded.limit_usd, "
            f"limit_tokens=excluded.limit_tokens, flags=(spend.flags/{RAISE}+1)*{RAISE}, updated_at=excluded.updated_at")


def _adds(rows: Sequence[Row], ph: str) -> tuple[str, Sequence[Row]]:
    return _add_sql(ph), rows


def _raises(rows: Sequence[Row], ph: str) -> tuple[str, Sequence[Row]]:
    return _raise_sql(ph), rows


ADDS = Table("spend", _COLS, _KEY, ("mission_id",), write=_adds, additive=True)
"""One call's spend (or a crossing's flags) added to an account's row, inserted if absent."""
RAISES = Table("spend", _COLS, _KEY, ("mission_id",), write=_raises)
"""A task's budget as ``polpo retry --budget`` raised it; its crossings start again."""


def add(tx: Tx, row: Row) -> Tx:
    """``tx`` also adds ``row`` (``_COLS`` order, amounts as deltas) to its account."""
    return tx.put(ADDS, row)


def raise_limit(tx: Tx, row: Row) -> Tx:
    """``tx`` also sets a task's raised budget (``row``'s ``limit_*``) and clears its crossings."""
    return tx.put(RAISES, row)


class SpendTable:
    """``spend`` in a shared in-memory database, with the statements' rules."""

    def __init__(self, rows: dict[tuple[Any, ...], dict[str, Any]]) -> None:
        self.rows = rows

    def apply(self, table: R.Table, rows: Sequence[R.Row]) -> None:
        for row in rows:
            rec = dict(zip(_COLS, row, strict=True))
            key = tuple(rec[k] for k in _KEY)
            old = self.rows.get(key)
            if old is None:
                self.rows[key] = rec
            elif table is ADDS:
                for c in _SUMMED:
                    old[c] += rec[c]
                old["usd_known"] *= rec["usd_known"]
                if rec["flags"] // RAISE == old["flags"] // RAISE:
                    old["flags"] |= rec["flags"]
                old["updated_at"] = rec["updated_at"]
            else:
                old.update(limit_usd=rec["limit_usd"], limit_tokens=rec["limit_tokens"],
                           flags=(old["flags"] // RAISE + 1) * RAISE, updated_at=rec["updated_at"])

    def committed(self) -> None:
        return None
