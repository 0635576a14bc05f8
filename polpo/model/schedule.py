"""A schedule as the store keeps it: one row per scheduled mission file.

``spec`` is the mission's validated document (the stored JSON each run starts from); ``cursor`` is the newest
scheduled instant dealt with (see :mod:`polpo.schedules.plan`); ``queued`` counts firings waiting for the active
run to end (``overlap: "queue"``); ``anchor`` is when the file was read (an interval counts from it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from polpo.mission.schema import MissionSpec
from polpo.schedules.plan import DEFAULT_GRACE, Policy
from polpo.schedules.triggers import Trigger, build, timezone_of

__all__ = ["Schedule", "ScheduleStatus"]


class ScheduleStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"  # by a person: nothing fires; missed firings are let go when resumed
    ENDED = "ended"  # no firing left (a one-shot fired, endDate passed)
    REMOVED = "removed"  # by a person; a new version of the file makes it anew


@dataclass
class Schedule:
    id: str
    source: str
    hash: str
    spec: str  # the mission document's stored JSON
    expr: str
    timezone: str | None
    status: ScheduleStatus
    anchor: datetime
    updated_at: datetime
    cursor: datetime | None = None
    queued: int = 0
    last_run: str | None = None  # the mission id of the newest run it started

    @property
    def open(self) -> bool:
        return self.status in (ScheduleStatus.ACTIVE, ScheduleStatus.PAUSED)

    def head(self) -> MissionSpec:
        """The document's top level (its schedule fields), without its tasks."""
        return MissionSpec.model_validate_json(_head_json(self.spec))

    def trigger(self, head: MissionSpec | None = None) -> Trigger:
        h = head or self.head()
        return build(self.expr, timezone_of(self.timezone), anchor=self.anchor, end=h.end_date)

    @staticmethod
    def policy_of(head: MissionSpec) -> Policy:
        return Policy(overlap=head.overlap or "skip", catch_up=head.catch_up or "one",
                      misfire_grace=head.misfire_grace or DEFAULT_GRACE)


def _head_json(spec: str) -> bytes:
    """The document with only its first task: enough to validate the head, cheap for a big mission."""
    import orjson

    doc = orjson.loads(spec)
    doc["tasks"] = doc.get("tasks", [])[:1]
    return orjson.dumps(doc)
