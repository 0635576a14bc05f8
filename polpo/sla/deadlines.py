"""SLA arithmetic. Pure: times in, the marks (``warning`` / ``violated`` / ``met``) to record out.

Each entity gets at most one mark of each kind, ever: the caller passes the kinds already recorded (the
``sla_marks`` rows, which survive a restart — Polpo's in-memory sets re-warned after every restart) and
records what comes back.

* ``warning``: the used fraction of the time ``start → deadline`` reached ``warning_threshold`` while the
  deadline has not passed yet. Data ``{entityId, entityType, deadline, elapsed, remaining, percentUsed}``;
  ``elapsed``/``remaining`` are milliseconds, ``percentUsed`` a 0–1 fraction (Polpo's names and units).
* ``violated``: ``now > deadline`` (strict; exactly at the deadline is still in time). Data
  ``{entityId, entityType, deadline, overdueMs}``. A deadline already past at the first check yields only
  ``violated``: a warning then would announce something that has already happened.
* ``met``: completion at or before the deadline, data ``{entityId, entityType, deadline, marginMs}``. A late
  completion that the monitor had not caught yet yields ``violated`` instead, so every missed deadline is
  recorded exactly once (metrics count ``met``/``violated`` marks).

After ``violated`` or ``met`` nothing more is produced for the entity.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import TypeAdapter

from polpo.clock import iso
from polpo.durations import Deadline

__all__ = ["EntityType", "Mark", "MarkKind", "completion_mark", "resolve_deadline", "sla_status"]

MarkKind = Literal["warning", "violated", "met"]
EntityType = Literal["task", "mission"]

_DEADLINE: TypeAdapter[datetime | timedelta] = TypeAdapter(Deadline)
_EPS = 1e-9


@dataclass(frozen=True)
class Mark:
    """One SLA mark: the event ``sla:<kind>`` with ``data`` as payload, and the ``sla_marks`` row."""

    kind: MarkKind
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def event(self) -> str:
        return f"sla:{self.kind}"


def resolve_deadline(deadline: datetime | timedelta | str, start: datetime) -> datetime:
    """An absolute, aware deadline: an instant as is, a duration counted from ``start`` (the mission's start).

    Strings are parsed like the mission schema's ``deadline`` (ISO-8601 instant with a zone, or ``PT2H``);
    a bad one raises ``ValueError``.
    """
    if start.tzinfo is None:
        raise ValueError("start must be timezone-aware")
    value = _DEADLINE.validate_python(deadline) if isinstance(deadline, str) else deadline
    if isinstance(value, timedelta):
        return start + value
    if value.tzinfo is None:
        raise ValueError("a deadline instant needs a timezone, e.g. Z or +01:00")
    return value


def sla_status(now: datetime, start: datetime, deadline: datetime, warning_threshold: float,
               already: Set[str], *, entity_id: str, entity_type: EntityType) -> list[Mark]:
    """The marks a check at ``now`` adds for an open entity (none, a warning, or a violation)."""
    if "violated" in already or "met" in already:
        return []
    head = {"entityId": entity_id, "entityType": entity_type, "deadline": iso(deadline)}
    if now > deadline:
        return [Mark("violated", {**head, "overdueMs": _ms(now - deadline)})]
    if "warning" in already:
        return []
    used = percent_used(now, start, deadline)
    if used + _EPS < warning_threshold:
        return []
    elapsed = max(now - start, timedelta(0))
    return [Mark("warning", {**head, "elapsed": _ms(elapsed), "remaining": _ms(deadline - now),
                             "percentUsed": round(used, 4)})]


def completion_mark(finished_at: datetime, deadline: datetime, *, entity_id: str, entity_type: EntityType,
                    already: Set[str] = frozenset()) -> Mark | None:
    """The mark for an entity finishing at ``finished_at``: ``met``, a late ``violated``, or None if recorded."""
    if "met" in already:
        return None
    head = {"entityId": entity_id, "entityType": entity_type, "deadline": iso(deadline)}
    if finished_at <= deadline:
        return Mark("met", {**head, "marginMs": _ms(deadline - finished_at)})
    if "violated" in already:
        return None
    return Mark("violated", {**head, "overdueMs": _ms(finished_at - deadline)})


def percent_used(now: datetime, start: datetime, deadline: datetime) -> float:
    """Fraction of ``start → deadline`` used at ``now`` (0 before start; 1 when the window is empty)."""
    total = deadline - start
    if total <= timedelta(0):
        return 1.0
    return max(now - start, timedelta(0)) / total


def _ms(td: timedelta) -> int:
    return round(td / timedelta(milliseconds=1))
