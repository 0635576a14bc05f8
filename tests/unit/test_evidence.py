"""What reviewers are shown of an attempt whose files could not be attributed: no files, and why."""

from __future__ import annotations

from datetime import UTC, datetime

from polpo.assessment.evidence import evidence
from polpo.changes.tracker import SHARED_NOTE
from polpo.model.records import Attempt
from polpo.model.status import AttemptKind, AttemptStatus


def _attempt(files: dict[str, object] | None) -> Attempt:
    return Attempt(id="m:1/1", task_id="m:1", mission_id="m", number=1, kind=AttemptKind.INITIAL, agent="shell",
                   status=AttemptStatus.FINISHED, started_at=datetime.now(UTC), exit_code=0, stdout_tail="wrote a.txt",
                   files=files)


def test_an_unattributed_attempt_gives_reviewers_no_files_and_the_reason() -> None:
    note = f"{SHARED_NOTE} (task m:2 ran in it meanwhile)"
    files, timeline = evidence(_attempt({"created": [], "modified": [], "deleted": [], "attributed": False,
                                         "tracking": "watch", "note": note}))
    assert files == []  # so the reviewers review the output
    assert f"Files: {note}" in timeline and "wrote a.txt" in timeline


def test_rows_written_before_attribution_still_read() -> None:
    files, timeline = evidence(_attempt({"created": ["a.txt"], "modified": ["b.txt"], "deleted": []}))
    assert files == ["a.txt", "b.txt"] and "Files:" not in timeline


def test_the_same_work_reviewed_again_gets_the_same_timeline_whatever_the_clock_said() -> None:
    """The timeline is part of the judge cache's key: 0.04 s one run and 0.06 s the next gave "0.0 s" and "0.1 s",
    and an identical review missed the cache (tests/integration/test_judge_cache.py, on a loaded machine)."""
    quick, slower = _attempt(None), _attempt(None)
    quick.duration, slower.duration = 0.04, 0.06
    assert evidence(quick)[1] == evidence(slower)[1]
    assert "attempt 1: exit code 0, under 1 s" in evidence(quick)[1]
    slower.duration = 74.6
    assert "attempt 1: exit code 0, 75 s" in evidence(slower)[1]
