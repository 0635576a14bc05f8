"""Schedules as ``polpo schedules`` and ``GET /api/schedules`` show them: the stored rows and each next firing.

The next firing is computed from the row with the same trigger and the same pure rule the daemon fires by
(:func:`polpo.schedules.plan.next_fire`), so what is listed is what will happen.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from polpo.clock import iso
from polpo.model.schedule import ScheduleStatus
from polpo.schedules.plan import next_fire
from polpo.store.read import Conn
from polpo.store.rows import schedule_from_row

__all__ = ["schedule_rows", "schedules_view"]


def schedule_rows(con: Conn) -> list[dict[str, Any]]:
    """Every schedule not removed; none on a store from before schedules (not yet migrated by a daemon)."""
    try:
        return [dict(r) for r in con.execute("SELECT * FROM schedules WHERE status != 'removed' ORDER BY id")]
    except sqlite3.OperationalError:  # no such table: a SQLite store no daemon of this version has opened
        return []


def schedules_view(con: Conn, now: datetime) -> list[dict[str, Any]]:
    """camelCase rows: id, file, expression, timezone, status, nextRunAt, lastFiredFor, lastRun, queued, and the
    document's policies."""
    out = []
    for row in schedule_rows(con):
        s = schedule_from_row(row)
        nxt: datetime | None = None
        policies: dict[str, Any] = {}
        try:
            head = s.head()
            policy = s.policy_of(head)
            policies = {"overlap": policy.overlap, "catchUp": policy.catch_up,
                        "misfireGrace": policy.misfire_grace.total_seconds(),
                        "endDate": None if head.end_date is None else iso(head.end_date)}
            if s.status is ScheduleStatus.ACTIVE:
                nxt = next_fire(s.trigger(head), s.cursor, s.anchor, now)
        except ValueError as e:  # a stored document this polpo cannot read back: shown, not fatal
            policies = {"error": str(e)}
        out.append({"id": s.id, "file": s.source, "expression": s.expr, "timezone": s.timezone or "UTC",
                    "status": s.status.value, "nextRunAt": None if nxt is None else iso(nxt),
                    "lastFiredFor": None if s.cursor is None else iso(s.cursor), "lastRun": s.last_run,
                    "queued": s.queued, **policies})
    return out
