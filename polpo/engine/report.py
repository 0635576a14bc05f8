"""The report carried by ``mission:completed``. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from polpo.clock import iso
from polpo.engine.model import Mission, Task


def mission_report(m: Mission, tasks: Sequence[Task], counts: Mapping[str, int],
                   now: datetime) -> dict[str, Any]:
    states = Counter(t.status for t in tasks)
    failed = [{"taskId": t.id, "title": t.title, "reason": t.reason} for t in tasks if t.status == "failed"]
    duration = (now - m.created_at).total_seconds()
    summary = (f"{states.get('done', 0)}/{len(tasks)} tasks done"
               + (f", {len(failed)} failed" if failed else ""))
    return {
        "summary": summary,
        "tasks": {"total": len(tasks), "done": states.get("done", 0), "failed": states.get("failed", 0)},
        "attempts": counts.get("attempts", 0),
        "fixes": counts.get("fixes", 0),
        "retries": counts.get("retries", 0),
        "durationSeconds": round(duration, 3),
        "startedAt": iso(m.created_at),
        "finishedAt": iso(now),
        "failedTasks": failed,
    }
