"""The rows :mod:`polpo.attention` reads, by name: tasks that wait for a person, reached checkpoints, rejected
mission files. Each read is small (only running missions' waiting tasks), so the web view may ask on every event.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from polpo.store.read import Conn

__all__ = ["READS", "rows"]

_OPEN = "SELECT id FROM missions WHERE status IN ('running', 'cancelling')"
REJECTED_SHOWN = 100  # the newest rejected files listed


def waiting_tasks(con: Conn) -> list[dict[str, Any]]:
    """Tasks of open missions that wait for a person (awaiting an answer, approval or review, on hold)."""
    return [dict(r) for r in con.execute(
        "SELECT id, mission_id, title, agent, status, waiting_for, reason, updated_at FROM tasks "
        f"WHERE mission_id IN ({_OPEN}) AND (waiting_for IS NOT NULL OR status IN ('awaiting_answer', 'awaiting_approval', 'awaiting_review', 'on_hold')) "
        "ORDER BY updated_at, id")]


def reached_checkpoints(con: Conn) -> list[dict[str, Any]]:
    return [dict(r) for r in con.execute(
        "SELECT mission_id, name, at FROM holds WHERE kind = 'checkpoint' AND status = 'reached' "
        "AND mission_id IN (SELECT id FROM missions WHERE status = 'running') ORDER BY at, mission_id, name")]


def rejected_sources(con: Conn) -> list[dict[str, Any]]:
    """Mission files whose latest bytes were rejected and that are still in the folder."""
    rows = [dict(r) for r in con.execute(
        "SELECT path, hash, reason, seen_at FROM sources WHERE outcome = 'rejected' ORDER BY seen_at DESC LIMIT ?",
        (REJECTED_SHOWN,))]
    return [r for r in rows if Path(r["path"]).is_file()]  # a file removed since waits for nobody


READS: dict[str, Callable[[Conn], list[dict[str, Any]]]] = {
    "tasks": waiting_tasks,
    "checkpoints": reached_checkpoints,
    "rejected": rejected_sources,
}


def rows(con: Conn) -> dict[str, list[dict[str, Any]]]:
    """Every read's rows, by name (what :func:`polpo.attention.items.gather` takes)."""
    return {name: read(con) for name, read in READS.items()}


def rejected_file_named(con: Conn, name: str) -> dict[str, Any] | None:
    """The rejected mission file a mission named ``name`` would have come from (``missions/NAME.json``), if any."""
    row = con.execute("SELECT path, reason, seen_at FROM sources WHERE outcome = 'rejected' AND path LIKE ? "
                      "ORDER BY seen_at DESC LIMIT 1", (f"%/{name}.json",)).fetchone()
    return dict(row) if row is not None else None
