"""What ``polpo show --json`` prints and the HTTP API serves: one mission or one task, assembled once.

The CLI keeps the stored column names (``created_at``); the API gives the same document with camelCase keys
(:func:`camel`), like the events. A mission's stored spec can be passed through unparsed (``raw_spec``), so a
10 000-task mission is not parsed and dumped again on every request.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import orjson

from polpo.store import read, spend_read
from polpo.store.read import Conn

__all__ = ["camel", "mission_view", "missions_view", "quality", "task_view"]


def task_view(con: Conn, ident: str, *, full: bool) -> dict[str, Any] | None:
    """A task with its attempts, assessments, checks and reviews; ``full`` adds transcripts and whole traces."""
    t = read.task(con, ident)
    if t is None:
        return None
    t["attemptCount"] = t["attempts"]
    t["hasTiers"] = read.task_has_tiers(con, t["id"])
    t["attempts"] = read.attempts(con, t["id"], full=full)
    t["dimensions"] = read.dimensions(con, t["id"])
    t["override"] = read.override(con, t["id"])
    return t


def mission_view(con: Conn, ident: str, *, raw_spec: bool = False, camel_case: bool = False) -> dict[str, Any] | None:
    """A mission (by id or name) with its tasks, gate results and quality; ``raw_spec`` keeps the spec as JSON text
    wrapped in ``orjson.Fragment`` (serialised as is) instead of parsing it; ``camel_case`` gives the API's keys
    (the task rows are built with them directly: a 10 000-task mission is not copied twice)."""
    m = read.mission(con, ident)
    if m is None:
        return None
    keys, rows = read.task_rows(con, m["id"])
    names = [_camel_key(k) for k in keys] if camel_case else keys
    tasks = [dict(zip(names, r, strict=True)) for r in rows]
    m["gates"] = read.gates(con, m["id"])
    m["holds"] = read.holds(con, m["id"])
    # a running mission is paused for the tasks its reached checkpoints block (the others go on)
    m["paused_at"] = [h["name"] for h in m["holds"] if h["kind"] == "checkpoint" and h["status"] == "reached"]
    m["spec"] = orjson.Fragment(m["spec"]) if raw_spec else orjson.loads(m["spec"])
    m["quality"] = quality({**m, "tasks": tasks})
    m["spend"] = spend_read.spend(con, [m["id"]])[m["id"]]
    if camel_case:
        m = camel(m)
    m["tasks"] = tasks
    return m


def missions_view(con: Conn, *, include_finished: bool = True, limit: int = 200, before: int | None = None,
                  statuses: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The latest missions (before the one numbered ``before``, of ``statuses``), oldest first, with their task
    counts (not their tasks): a page of :func:`polpo.store.read.missions`."""
    ms = read.missions(con, include_finished=include_finished, limit=limit, before=before, statuses=statuses)
    spent = spend_read.spend(con, [m["id"] for m in ms])
    for m in ms:
        m["spend"] = spent[m["id"]]["total"]
    return ms


def quality(m: dict[str, Any]) -> dict[str, Any]:
    """``{average, scored, …}``: a finished mission's report quality (its threshold and verdict too), or, while it
    runs, the plain mean score of its scored done tasks so far (None without any)."""
    report = m.get("report") or {}
    rq = report.get("quality") if isinstance(report, dict) else None
    scores = [t["score"] for t in m.get("tasks") or [] if t.get("status") == "done" and t.get("score") is not None]
    if isinstance(rq, dict) and "average" in rq:
        return {**rq, "scored": len(scores)}
    return {"average": round(sum(scores) / len(scores), 4) if scores else None, "scored": len(scores)}


# ---------------------------------------------------------------------------------------------- camelCase

_WORD = re.compile(r"_([a-z0-9])")
_NESTED = frozenset({"tasks", "gates", "holds", "attempts", "assessments", "checks", "override"})


@lru_cache(maxsize=512)
def _camel_key(key: str) -> str:
    return _WORD.sub(lambda m: m.group(1).upper(), key)


def camel(doc: dict[str, Any]) -> dict[str, Any]:
    """Stored column names in camelCase, through the row lists a view nests (tasks, attempts, checks …); the
    JSON documents inside (spec, report, traces, transcripts) are left as they were stored."""
    out: dict[str, Any] = {}
    for k, v in doc.items():
        if k in _NESTED and isinstance(v, list):
            v = [camel(x) if isinstance(x, dict) else x for x in v]
        elif k in _NESTED and isinstance(v, dict):
            v = camel(v)
        out[_camel_key(k)] = v
    return out
