"""The report carried by ``mission:completed``. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from polpo.clock import iso
from polpo.model.records import Mission, Task


def mission_report(m: Mission, tasks: Sequence[Task], now: datetime) -> dict[str, Any]:
    states = Counter(str(t.status) for t in tasks)
    failed = [{"taskId": t.id, "title": t.title, "reason": t.reason} for t in tasks if t.status == "failed"]
    duration = (now - m.created_at).total_seconds()
    summary = (f"{states.get('done', 0)}/{len(tasks)} tasks done"
               + (f", {len(failed)} failed" if failed else ""))
    return {
        "summary": summary,
        "tasks": {"total": len(tasks), "done": states.get("done", 0), "failed": states.get("failed", 0)},
        "attempts": sum(t.attempts for t in tasks),
        "fixes": sum(t.total_fixes for t in tasks),
        "retries": sum(t.retries for t in tasks),
        "durationSeconds": round(duration, 3),
        "startedAt": iso(m.created_at),
        "finishedAt": iso(now),
        "failedTasks": failed,
        "spend": m.spent.summary(),
    }
