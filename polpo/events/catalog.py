"""Event names and the event record.

Names follow Polpo's catalog where Polpo has one (``task:transition``, ``assessment:complete`` …), so
notification rules written for Polpo keep working; ``mission:accepted`` / ``mission:rejected`` are ours,
because Polpo has no watched folder.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

MISSION_ACCEPTED = "mission:accepted"
MISSION_REJECTED = "mission:rejected"
MISSION_COMPLETED = "mission:completed"
MISSION_CANCELLED = "mission:cancelled"
MISSION_RESUMED = "mission:resumed"
TASK_CREATED = "task:created"
TASK_TRANSITION = "task:transition"
TASK_RECOVERED = "task:recovered"
TASK_TIMEOUT = "task:timeout"
TASK_FIX = "task:fix"
TASK_RETRY = "task:retry"
TASK_RETRY_BLOCKED = "task:retry:blocked"
TASK_MAX_RETRIES = "task:maxRetries"
AGENT_SPAWNED = "agent:spawned"
AGENT_FINISHED = "agent:finished"
ASSESSMENT_STARTED = "assessment:started"
ASSESSMENT_CHECK_STARTED = "assessment:check:started"
ASSESSMENT_CHECK_COMPLETE = "assessment:check:complete"
ASSESSMENT_COMPLETE = "assessment:complete"
ASSESSMENT_CORRECTED = "assessment:corrected"
ASSESSMENT_JUDGED = "assessment:judged"
ESCALATION_TRIGGERED = "escalation:triggered"
TASK_APPROVED = "task:approved"
QUALITY_GATE_PASSED = "quality:gate:passed"
QUALITY_GATE_FAILED = "quality:gate:failed"
QUALITY_THRESHOLD_FAILED = "quality:threshold:failed"
SLA_WARNING = "sla:warning"
SLA_VIOLATED = "sla:violated"
SLA_MET = "sla:met"
NOTIFICATION_SENT = "notification:sent"
NOTIFICATION_FAILED = "notification:failed"
ORCHESTRATOR_STARTED = "orchestrator:started"
ORCHESTRATOR_SHUTDOWN = "orchestrator:shutdown"
COMMAND_REFUSED = "command:refused"

ALL_EVENTS: tuple[str, ...] = tuple(
    v for k, v in sorted(globals().items()) if k.isupper() and isinstance(v, str) and ":" in v
)


@dataclass(frozen=True, slots=True)
class Event:
    """One state change, as persisted in ``events`` and written to ``events.jsonl``."""

    seq: int
    ts: str
    event: str
    mission_id: str | None
    task_id: str | None
    data: dict[str, Any] = field(default_factory=dict)

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"seq": self.seq, "ts": self.ts, "event": self.event}
        if self.mission_id is not None:
            out["missionId"] = self.mission_id
        if self.task_id is not None:
            out["taskId"] = self.task_id
        out["data"] = self.data
        return out


def matches(name: str, pattern: str) -> bool:
    """Glob match of an event name: ``*`` within one ``:`` segment, ``**`` across segments."""
    if pattern in ("*", "**"):
        return True
    if "**" in pattern:
        return fnmatch.fnmatchcase(name, pattern.replace("**", "*"))
    parts, pparts = name.split(":"), pattern.split(":")
    if len(parts) != len(pparts):
        # "task:*" also matches "task:retry:blocked": a trailing * swallows the rest.
        if pparts[-1] == "*" and len(parts) > len(pparts):
            parts = [*parts[: len(pparts) - 1], ":".join(parts[len(pparts) - 1 :])]
        else:
            return False
    return all(fnmatch.fnmatchcase(p, q) for p, q in zip(parts, pparts, strict=True))
