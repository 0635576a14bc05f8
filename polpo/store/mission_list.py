"""The missions list: the newest first pages of it, filtered by status or a set of ids and searched by name or id
(``polpo status``, ``GET /api/missions``, the web view's list)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from polpo.store.read import Conn

__all__ = ["Filter", "count", "missions"]

OPEN = ("running", "cancelling")


@dataclass(frozen=True)
class Filter:
    """Which missions: ``status`` one of theirs, several comma-separated, or ``open`` (running or cancelling);
    ``ids`` only these (what waits for a person); ``name`` a part of the name or id, any case; ``before`` only
    those accepted before the one numbered so (``seq``: the next page, an index walk whatever the history)."""

    status: str | None = None
    ids: Collection[str] | None = None
    name: str | None = None
    before: int | None = None

    def where(self) -> tuple[str, list[Any]]:
        terms: list[str] = []
        args: list[Any] = []
        if self.status:
            wanted = list(OPEN) if self.status == "open" else [s for s in self.status.split(",") if s]
            terms.append(f"m.status IN ({', '.join('?' * len(wanted))})")
            args.extend(wanted)
        if self.before is not None:
            terms.append("m.seq < ?")
            args.append(self.before)
        if self.ids is not None:
            terms.append(f"m.id IN ({', '.join('?' * len(self.ids)) or 'NULL'})")
            args.extend(self.ids)
        if self.name:
            like = "%" + self.name.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            terms.append("(LOWER(m.name) LIKE ? ESCAPE '\\' OR LOWER(m.id) LIKE ? ESCAPE '\\')")
            args.extend([like, like])
        return ("WHERE " + " AND ".join(terms) + " ") if terms else "", args


def count(con: Conn, f: Filter | None = None) -> int:
    where, args = (f or Filter()).where()
    return int(con.execute(f"SELECT COUNT(*) FROM missions m {where}", args).fetchone()[0])


def missions(con: Conn, f: Filter | None = None, *, limit: int | None = 200, offset: int = 0) -> list[dict[str, Any]]:
    """The newest ``limit`` missions (all if None) after skipping the ``offset`` newest, oldest first."""
    where, args = (f or Filter()).where()
    sql = ("SELECT m.id, m.seq, m.name, m.status, m.source, m.run, m.created_at, m.finished_at, m.reason, m.home, "
           "(SELECT COUNT(*) FROM tasks t WHERE t.mission_id = m.id) AS total, "
           "(SELECT COUNT(*) FROM tasks t WHERE t.mission_id = m.id AND t.status = 'done') AS done, "
           "(SELECT COUNT(*) FROM tasks t WHERE t.mission_id = m.id AND t.status = 'failed') AS failed "
           f"FROM missions m {where}ORDER BY m.seq DESC")
    if limit is not None:
        sql, args = sql + " LIMIT ?", [*args, limit]
    if offset:  # (no "LIMIT -1" for all of them: PostgreSQL refuses SQLite's way)
        sql, args = sql + " OFFSET ?", [*args, offset]
    return [dict(r) for r in con.execute(sql, args)][::-1]
