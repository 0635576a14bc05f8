"""Readable lines for `polpo tail`: the events of assessment, escalation and SLA say what happened."""

from __future__ import annotations

from typing import Any

import pytest

from polpo.events.render import render, summary


@pytest.mark.parametrize(("event", "data", "expected"), [
    ("assessment:complete", {"passed": True, "globalScore": 4.25, "trigger": "fix", "message": "2/2 checks passed"},
     "passed (score 4.25) [fix]: 2/2 checks passed"),
    ("assessment:complete", {"passed": False, "message": "1/1 checks failed"}, "failed: 1/1 checks failed"),
    ("assessment:corrected", {"corrections": [{"index": 0, "field": "command", "old": "a", "new": "b"}]},
     "expectation judge corrected #0 command: 'a' → 'b'"),
    ("escalation:triggered", {"level": 1, "handler": "agent", "target": "senior"},
     "escalated (level 1) to agent senior"),
    # the payload the SLA keeper really emits: percentUsed is a 0–1 fraction, times are milliseconds
    ("sla:warning", {"entityId": "m:1", "entityType": "task", "deadline": "2026-01-01T00:00:00Z", "elapsed": 80_000,
                     "remaining": 20_000, "percentUsed": 0.8},
     "SLA warning: task m:1 has used 80% of its time; 20s left (deadline 2026-01-01T00:00:00Z)"),
    ("sla:violated", {"entityId": "m", "entityType": "mission", "deadline": "D", "overdueMs": 1500},
     "SLA violated: mission m is 2s past its deadline D"),
    ("sla:met", {"entityId": "m:1", "entityType": "task", "deadline": "D", "marginMs": 20},
     "SLA met: task m:1 finished 20 ms before its deadline D"),
    ("quality:threshold:failed", {"avgScore": 2.5, "threshold": 3.0},
     "average score 2.5 below the mission threshold 3.0"),
    ("agent:spawned", {"agentName": "coder", "attempt": 1, "kind": "initial", "pid": None, "model": "m"},
     "agent coder started (attempt 1, initial, model m)"),
    ("fault:paused", {"work": "intake", "path": "/m/job.json", "error": "EROFS: Read-only file system (…)",
                      "retryIn": 0.9}, "intake paused on /m/job.json: EROFS: Read-only file system (…); trying "
                                       "again in 0.9 s"),
    ("fault:resumed", {"work": "event log", "path": "/s/events.jsonl", "waited": 12.5, "tries": 4},
     "event log resumed on /s/events.jsonl after 12.5 s (4 failed tries)"),
    ("assessment:needs-person", {"title": "greet", "reason": "score 3.00 is between 2.00 and 4.00",
                                 "approve": "polpo approve m:1", "reject": "polpo reject m:1 --reason TEXT"},
     "greet waits for a person's review: score 3.00 is between 2.00 and 4.00; polpo approve m:1 or polpo reject "
     "m:1 --reason TEXT"),
    ("assessment:person-verdict", {"passed": False, "score": 2, "reason": "no greeting", "by": "ada"},
     "failed by ada (score 2): no greeting"),
    ("assessment:check:complete", {"type": "llm_review", "label": "greets", "passed": False, "globalScore": 3.0,
                                   "message": "Score 3.00/5", "undecided": "between the limits"},
     "[PERSON] llm_review greets: Score 3.00/5 (score 3.00)"),
])
def test_summary(event: str, data: dict[str, Any], expected: str) -> None:
    assert summary({"event": event, "data": data}) == expected


def test_render_has_time_event_and_subject() -> None:
    line = render({"ts": "2026-11-22T10:11:12.345Z", "event": "task:fix", "taskId": "m:1",
                   "data": {"attempt": 1, "maxFix": 2}})
    assert line.startswith("10:11:12.345  task:fix")
    assert "m:1" in line and line.endswith("fix attempt 1/2")
