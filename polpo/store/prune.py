"""What retention removes, declared once: a mission's rows in every table, and what outlives no mission.

Each table's rows of a set of missions are found by one relation (:data:`RELATIONS`): its own ``mission_id``, or
its task's, attempt's or assessment's. The same relation gives the SQL (SQLite's ``?`` with the ids as one JSON
array, PostgreSQL's ``$1`` as a text array) and the filter over the memory store's dictionaries
(:class:`MemoryPruning`), so the backends cannot drift apart. A set of missions is removed in one short
transaction, and only those still finished before the cut-off when it runs (a person's retry may have opened one
meanwhile): every statement keeps to them, and the missions' own rows go last.

Besides the missions, what grows with time without belonging to a kept mission goes by age: events of no kept
mission (a start, a notification, a rejected file's, a schedule's) a window of ``seq`` at a time, never the newest
event (what a restart numbers from and ``events.jsonl.pos`` is checked against); handled commands; the agents'
and the daemon's spend of past days; the records of files that are gone and that no mission or schedule needs.

A backend implements two primitives, :meth:`SqlPruning._prune_read` and :meth:`SqlPruning._prune_write` (one
transaction), on a connection of its own, off the event loop: pruning never holds the daemon's writer.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["FINISHED", "RELATIONS", "MemoryPruning", "Pruned", "SqlPruning", "export_statements", "mission_of",
           "removal_statements"]

FINISHED = ("completed", "failed", "cancelled")
_FINISHED = ", ".join(f"'{s}'" for s in FINISHED)

# (table, its column, the relation: "mission" = the column is a mission id; "task"/"attempt"/"assessment" = the
# column names a task/attempt/assessment of the missions). Removed in this order (children first), missions last.
RELATIONS: tuple[tuple[str, str, str], ...] = (
    ("checks", "assessment_id", "assessment"),
    ("transcripts", "attempt_id", "attempt"),
    ("reviews", "task_id", "task"),
    ("dimensions", "task_id", "task"),
    ("assessments", "task_id", "task"),
    ("events", "mission_id", "mission"),
    ("gates", "mission_id", "mission"),
    ("holds", "mission_id", "mission"),
    ("sla_marks", "mission_id", "mission"),
    ("spend", "mission_id", "mission"),
    ("overrides", "mission_id", "mission"),
    ("attempts", "mission_id", "mission"),
    ("tasks", "mission_id", "mission"),
)
_BY_TASK = frozenset(t for t, _, rel in RELATIONS if rel != "mission")

Rec = dict[str, Any]
Step = tuple[str, tuple[Any, ...]]


@dataclass(frozen=True)
class Pruned:
    """A mission removed, with what the retention does next outside the store (its workspace, its file)."""

    id: str
    source: str
    workspace: str


def mission_of(table: str, row: Mapping[str, Any]) -> str | None:
    """The mission a row of ``table`` belongs to (a task id is ``MISSION:N``; attempts and assessments extend it)."""
    if table in _BY_TASK:
        task = row.get("task_id")
        return None if task is None else str(task).rpartition(":")[0]
    mid = row.get("mission_id")
    return None if mid is None else str(mid)


# ------------------------------------------------------------------------------------------------- the SQL


def _marks(ph: str, n: int) -> list[str]:
    return [f"${i}" for i in range(1, n + 1)] if ph == "$" else ["?"] * n


def _list(ph: str, mark: str) -> str:
    """A list argument: a text array (PostgreSQL), a JSON array (SQLite)."""
    return f"(SELECT unnest({mark}::text[]))" if ph == "$" else f"(SELECT value FROM json_each({mark}))"


def _of(relation: str, missions: str) -> str:
    return {"mission": missions,
            "task": f"(SELECT id FROM tasks WHERE mission_id IN {missions})",
            "attempt": f"(SELECT id FROM attempts WHERE mission_id IN {missions})",
            "assessment": f"(SELECT a.id FROM assessments a JOIN tasks t ON t.id = a.task_id "
                          f"WHERE t.mission_id IN {missions})"}[relation]


@functools.cache
def removal_statements(ph: str) -> tuple[str, ...]:
    """The statements of one removal (args: the ids, the cut-off), missions last, returning them."""
    ids, before = _marks(ph, 2)
    # SQLite: ``+`` keeps the status and finished_at indexes out of the plan: it cannot tell that the list is a few
    # ids, and walked every finished mission per statement (60 ms each at 100 000 missions) instead of the few keys
    keep_out = "+" if ph == "?" else ""
    eligible = (f"(SELECT id FROM missions WHERE id IN {_list(ph, ids)} AND {keep_out}status IN ({_FINISHED}) "
                f"AND {keep_out}finished_at < {before})")
    lock = [f"SELECT id FROM missions WHERE id IN {eligible} FOR UPDATE"] if ph == "$" else []
    return (*lock, *(f"DELETE FROM {table} WHERE {col} IN {_of(rel, eligible)}" for table, col, rel in RELATIONS),
            f"DELETE FROM missions WHERE id IN {eligible} RETURNING id, source, workspace")


@functools.cache
def export_statements(ph: str) -> tuple[tuple[str, str], ...]:
    """(table, its read) of every row of the missions listed (args: the ids), missions first."""
    ids = _list(ph, _marks(ph, 1)[0])
    return (("missions", f"SELECT * FROM missions WHERE id IN {ids}"),
            *((table, f"SELECT * FROM {table} WHERE {col} IN {_of(rel, ids)}") for table, col, rel in
              reversed(RELATIONS)))


def _unlabelled(keep_labelled: bool) -> str:
    return " AND NOT EXISTS (SELECT 1 FROM overrides o WHERE o.mission_id = m.id)" if keep_labelled else ""


@functools.cache
def _candidates(ph: str, keep_labelled: bool) -> str:
    before, limit = _marks(ph, 2)
    return (f"SELECT m.id FROM missions m WHERE m.finished_at < {before} AND m.status IN ({_FINISHED})"
            f"{_unlabelled(keep_labelled)} ORDER BY m.finished_at LIMIT {limit}")


@functools.cache
def _schedule_runs(ph: str, keep_labelled: bool) -> str:
    source, source2, offset, limit = _marks(ph, 4)
    return (f"SELECT m.id FROM missions m WHERE m.source = {source} AND m.status IN ({_FINISHED})"
            f"{_unlabelled(keep_labelled)} AND m.seq < (SELECT n.seq FROM missions n WHERE n.source = {source2} "
            f"ORDER BY n.seq DESC LIMIT 1 OFFSET {offset}) ORDER BY m.seq LIMIT {limit}")


@functools.cache
def _sources(ph: str) -> tuple[str, str]:
    seen, path, before, limit = _marks(ph, 4)
    listing = (f"SELECT path, seen_at FROM sources WHERE (seen_at, path) > ({seen}, {path}) AND seen_at < {before} "
               f"ORDER BY seen_at, path LIMIT {limit}")
    removal = (f"DELETE FROM sources WHERE path IN {_list(ph, _marks(ph, 1)[0])} "
               "AND NOT EXISTS (SELECT 1 FROM missions m WHERE m.source = sources.path) "
               "AND NOT EXISTS (SELECT 1 FROM schedules s WHERE s.source = sources.path AND s.status <> 'removed') "
               "RETURNING path")
    return listing, removal


@functools.cache
def _aged(ph: str) -> tuple[str, str, str, str]:
    lo, hi, before = _marks(ph, 3)
    first = _marks(ph, 1)[0]
    span = "SELECT MIN(seq) AS lo, MAX(seq) AS hi FROM events"
    at = f"SELECT ts FROM events WHERE seq >= {first} ORDER BY seq LIMIT 1"
    events = (f"DELETE FROM events WHERE seq >= {lo} AND seq < {hi} AND ts < {before} AND (mission_id IS NULL OR "
              "NOT EXISTS (SELECT 1 FROM missions m WHERE m.id = events.mission_id)) RETURNING seq")
    return span, at, events, first


@functools.cache
def _leftovers(ph: str) -> tuple[str, str]:
    first = _marks(ph, 1)[0]
    return (f"DELETE FROM commands WHERE status <> 'queued' AND handled_at < {first} RETURNING id",
            f"DELETE FROM spend WHERE mission_id IS NULL AND period <> '' AND period < {first} RETURNING key")


class SqlPruning:
    """Retention's reads and removals over the two primitives a SQL backend gives (``ph``: its placeholder)."""

    ph = "?"

    async def _prune_read(self, sql: str, *args: Any) -> list[Rec]:
        raise NotImplementedError

    async def _prune_write(self, steps: Sequence[Step]) -> list[list[Rec]]:
        """The statements in one transaction (all or nothing); each one's returned rows."""
        raise NotImplementedError

    async def prune_candidates(self, before: str, limit: int, keep_labelled: bool) -> list[str]:
        """Missions finished before ``before``, oldest first (not those with a person's verdict if asked)."""
        return [r["id"] for r in await self._prune_read(_candidates(self.ph, keep_labelled), before, limit)]

    async def schedule_runs_beyond(self, source: str, keep: int, limit: int, keep_labelled: bool) -> list[str]:
        """A file's finished runs older than its newest ``keep`` runs, oldest first."""
        return [r["id"] for r in await self._prune_read(_schedule_runs(self.ph, keep_labelled), source, source,
                                                        keep - 1, limit)]

    async def export_missions(self, ids: Sequence[str]) -> dict[str, dict[str, list[Rec]]]:
        """Every row of each of these missions, by table (what a removal exports first)."""
        out: dict[str, dict[str, list[Rec]]] = {mid: {} for mid in ids}
        for table, sql in export_statements(self.ph):
            for r in await self._prune_read(sql, list(ids)):
                mid = r["id"] if table == "missions" else mission_of(table, r)
                if mid in out:
                    out[mid].setdefault(table, []).append(r)
        return out

    async def prune_missions(self, ids: Sequence[str], before: str) -> list[Pruned]:
        """Remove those of these missions still finished before ``before``, in one transaction."""
        args = (list(ids), before)
        done = await self._prune_write([(sql, args) for sql in removal_statements(self.ph)])
        return [Pruned(r["id"], r["source"], r["workspace"]) for r in done[-1]]

    async def old_sources(self, after: tuple[str, str], before: str, limit: int) -> list[tuple[str, str]]:
        """(path, seen_at) of file records last seen before ``before``, after the (seen_at, path) ``after``,
        oldest first."""
        return [(r["path"], r["seen_at"]) for r in await self._prune_read(_sources(self.ph)[0], *after, before,
                                                                           limit)]

    async def prune_sources(self, paths: Sequence[str]) -> int:
        """Remove the records of these (gone) files that no mission and no schedule refers to."""
        if not paths:
            return 0
        return len((await self._prune_write([(_sources(self.ph)[1], (list(paths),))]))[0])

    async def prune_events(self, after: int, before: str, window: int) -> tuple[int, int | None]:
        """Events of no kept mission older than ``before`` with ``seq`` in ``[after, after + window)`` (never the
        newest): (how many went, where the next window starts; None once the events are too young or all seen)."""
        span_sql, at_sql, delete_sql, _ = _aged(self.ph)
        span = (await self._prune_read(span_sql))[0]
        if span["lo"] is None:
            return 0, None
        lo, hi = max(after, int(span["lo"])), int(span["hi"])
        first = await self._prune_read(at_sql, lo)
        if lo >= hi or not first or first[0]["ts"] >= before:
            return 0, None
        end = min(hi, lo + window)
        gone = (await self._prune_write([(delete_sql, (lo, end, before))]))[0]
        return len(gone), end

    async def prune_leftovers(self, before: str, before_day: str) -> int:
        """Handled commands older than ``before``; the agents' and daemon's spend of days before ``before_day``."""
        commands, spend = _leftovers(self.ph)
        done = await self._prune_write([(commands, (before,)), (spend, (before_day,))])
        return sum(len(rows) for rows in done)


# ------------------------------------------------------------------------------------------ the memory store

Tables = Mapping[str, dict[tuple[Any, ...], Rec]]


class MemoryPruning:
    """:class:`SqlPruning`'s reads and removals over the memory store's dictionaries (and its event list)."""

    tables: Tables
    events: list[Any]

    def _unlabelled(self, keep_labelled: bool) -> set[str]:
        return {r["mission_id"] for r in self.tables["overrides"].values()} if keep_labelled else set()

    async def prune_candidates(self, before: str, limit: int, keep_labelled: bool) -> list[str]:
        labelled = self._unlabelled(keep_labelled)
        found = sorted((r for r in self.tables["missions"].values() if r["status"] in FINISHED
                        and r["finished_at"] is not None and r["finished_at"] < before and r["id"] not in labelled),
                       key=lambda r: r["finished_at"])
        return [r["id"] for r in found[:limit]]

    async def schedule_runs_beyond(self, source: str, keep: int, limit: int, keep_labelled: bool) -> list[str]:
        runs = sorted((r for r in self.tables["missions"].values() if r["source"] == source), key=lambda r: r["seq"])
        if len(runs) < keep:
            return []
        labelled = self._unlabelled(keep_labelled)
        older = [r["id"] for r in runs[:len(runs) - keep] if r["status"] in FINISHED and r["id"] not in labelled]
        return older[:limit]

    async def export_missions(self, ids: Sequence[str]) -> dict[str, dict[str, list[Rec]]]:
        wanted = set(ids)
        out: dict[str, dict[str, list[Rec]]] = {mid: {} for mid in ids}
        for r in self.tables["missions"].values():
            if r["id"] in wanted:
                out[r["id"]]["missions"] = [dict(r)]
        for table, _, _ in reversed(RELATIONS):
            for r in self._rows(table):
                if (mid := mission_of(table, r)) in wanted:
                    out[mid].setdefault(table, []).append(dict(r))
        return out

    def _rows(self, table: str) -> Iterable[Rec]:
        if table == "events":
            return ({"seq": e.seq, "ts": e.ts, "event": e.event, "mission_id": e.mission_id, "task_id": e.task_id,
                     "data": e.data_bytes().decode(), "node": e.node} for e in self.events)
        return self.tables[table].values()

    async def prune_missions(self, ids: Sequence[str], before: str) -> list[Pruned]:
        wanted = set(ids)
        gone = [r for r in self.tables["missions"].values() if r["id"] in wanted and r["status"] in FINISHED
                and r["finished_at"] is not None and r["finished_at"] < before]
        removed = {r["id"] for r in gone}
        for r in gone:
            del self.tables["missions"][(r["id"],)]
        for table, _, _ in RELATIONS:
            if table == "events":
                self.events[:] = [e for e in self.events if e.mission_id not in removed]
                continue
            rows = self.tables[table]
            for key in [k for k, r in rows.items() if mission_of(table, r) in removed]:
                del rows[key]
        return [Pruned(r["id"], r["source"], r["workspace"]) for r in gone]

    async def old_sources(self, after: tuple[str, str], before: str, limit: int) -> list[tuple[str, str]]:
        found = sorted((r["seen_at"], r["path"]) for r in self.tables["sources"].values()
                       if (r["seen_at"], r["path"]) > after and r["seen_at"] < before)
        return [(path, seen) for seen, path in found[:limit]]

    async def prune_sources(self, paths: Sequence[str]) -> int:
        used = {r["source"] for r in self.tables["missions"].values()} | {
            r["source"] for r in self.tables["schedules"].values() if r["status"] != "removed"}
        gone = [p for p in paths if (p,) in self.tables["sources"] and p not in used]
        for p in gone:
            del self.tables["sources"][(p,)]
        return len(gone)

    async def prune_events(self, after: int, before: str, window: int) -> tuple[int, int | None]:
        if not self.events:
            return 0, None
        lo, hi = max(after, self.events[0].seq), self.events[-1].seq
        first = next((e for e in self.events if e.seq >= lo), None)
        if lo >= hi or first is None or first.ts >= before:
            return 0, None
        end = min(hi, lo + window)
        missions = {r["id"] for r in self.tables["missions"].values()}
        keep = [e for e in self.events if not (lo <= e.seq < end and e.ts < before and e.mission_id not in missions)]
        gone = len(self.events) - len(keep)
        self.events[:] = keep
        return gone, end

    async def prune_leftovers(self, before: str, before_day: str) -> int:
        commands = self.tables["commands"]
        old = [k for k, r in commands.items() if r["status"] != "queued" and (r["handled_at"] or "") < before
               and r["handled_at"] is not None]
        spend = self.tables["spend"]
        days = [k for k, r in spend.items() if r["mission_id"] is None and r["period"] and r["period"] < before_day]
        for k in old:
            del commands[k]
        for k in days:
            del spend[k]
        return len(old) + len(days)
