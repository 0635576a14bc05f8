"""Retention's pure decisions, and the bounded records that replaced per-mission memory (issue 31)."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from polpo.config import RetentionSettings
from polpo.engine.admission import SourceCache
from polpo.events.catalog import Event
from polpo.http.hub import EventHub
from polpo.intake.filing import done_name, file_away
from polpo.intake.stamps import SETTLED_NS, stamp_of, trusted
from polpo.model.status import SourceOutcome
from polpo.retention.plan import FAR_FUTURE, cutoffs, owned_workspace, pause_after
from polpo.store.rows import SourceRecord

NOW = datetime(2027, 3, 1, 12, 0, tzinfo=UTC)


def test_a_pass_removes_what_finished_before_now_minus_the_retention_and_the_spend_of_earlier_days() -> None:
    cut = cutoffs(NOW, timedelta(days=1))
    assert cut is not None and (cut.before, cut.day) == ("2027-02-28T12:00:00.000Z", "2027-02-28")
    assert cutoffs(NOW, None) is None  # "forever"
    assert cut.before < FAR_FUTURE  # a schedule's runs beyond its count go whatever their age


def test_the_config_says_forever_or_a_duration_and_refuses_zero() -> None:
    assert RetentionSettings().finished == timedelta(days=90)
    assert RetentionSettings(finished="forever").finished is None
    assert RetentionSettings(finished="P1D").finished == timedelta(days=1)
    with pytest.raises(ValueError, match='"forever"'):
        RetentionSettings(finished=0)
    assert RetentionSettings().finished_files == "done"


def test_only_a_workspace_the_daemon_made_in_the_state_folder_goes_with_its_mission(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert owned_workspace(str(state / "workspaces" / "m-2"), state) == state / "workspaces" / "m-2"
    assert owned_workspace(str(tmp_path / "project"), state) is None  # a folder the mission file named
    assert owned_workspace(str(state / "workspaces" / "a" / "b"), state) is None
    assert owned_workspace(str(state / "workspaces"), state) is None


def test_the_pruner_rests_as_long_as_its_last_batch_took() -> None:
    assert pause_after(0.02) == pytest.approx(0.02) and pause_after(-1) == 0.0


def test_a_filed_file_keeps_its_name_and_a_later_run_or_a_taken_name_gets_another() -> None:
    assert [done_name("report.json", 1, k) for k in (1, 2, 3)] == ["report.json", "report-2.json", "report-3.json"]
    assert [done_name("report.json", 4, k) for k in (1, 2)] == ["report#4.json", "report#4-2.json"]


def test_file_away_moves_only_the_bytes_that_ran_and_never_over_another_file(tmp_path: Path) -> None:
    import hashlib

    f = tmp_path / "job.json"
    f.write_bytes(b'{"tasks": []}')
    digest = hashlib.sha256(b'{"tasks": []}').hexdigest()
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "job.json").write_text("an earlier one")
    assert file_away(f, "other bytes' hash", 1) is None and f.exists()  # edited meanwhile: it stays
    to = file_away(f, digest, 1)
    assert to == tmp_path / "done" / "job-2.json" and to.read_bytes() == b'{"tasks": []}' and not f.exists()
    assert (tmp_path / "done" / "job.json").read_text() == "an earlier one"
    assert file_away(f, digest, 1) is None  # gone already


def test_a_stamp_is_trusted_only_once_the_file_is_older_than_a_clock_tick(tmp_path: Path) -> None:
    f = tmp_path / "m.json"
    f.write_text("{}")
    st = os.stat(f)
    assert trusted(st, st.st_mtime_ns + 1000) is None  # read right after it was written: a change may hide
    assert trusted(st, st.st_mtime_ns + SETTLED_NS) == stamp_of(st) == f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"
    old = time.time_ns() - 10 * SETTLED_NS
    os.utime(f, ns=(old, old))
    assert trusted(os.stat(f), time.time_ns()) is not None


def test_the_source_cache_keeps_the_files_seen_last_and_no_more() -> None:
    cache = SourceCache(3)
    for i in range(5):
        cache.put(SourceRecord(f"/m/{i}.json", "h", SourceOutcome.ACCEPTED, f"m{i}", 1))
    assert len(cache) == 3 and cache.get("/m/0.json") is None and cache.get("/m/2.json") is not None
    cache.put(SourceRecord("/m/5.json", "h", SourceOutcome.ACCEPTED, "m5", 1))  # 3 was the least recently used
    assert cache.get("/m/3.json") is None and cache.get("/m/2.json") is not None


def _ev(seq: int, mid: str) -> Event:
    return Event(seq, "2027-01-01T00:00:00.000Z", "task:transition", mid, None, {})


def test_the_hub_remembers_a_bounded_number_of_missions_and_a_forgotten_one_never_keeps_its_version() -> None:
    hub = EventHub(versions=2)
    hub.publish(_ev(1, "a"))
    v_a = hub.version("a")
    for seq, mid in ((2, "b"), (3, "c"), (4, "a"), (5, "d"), (6, "e")):
        hub.publish(_ev(seq, mid))
    assert len(hub._seq) == 2
    assert hub.version("a") != v_a  # an event of "a" came, then it was forgotten: a cached answer is stale
    before = hub.version("zz")
    hub.publish(_ev(7, "zz"))
    assert hub.version("zz") != before


def test_the_metrics_forget_a_task_that_ends_cancelled() -> None:
    from polpo.telemetry.follow import Follow

    f = Follow()
    f.transition("m:1", {"from": "pending", "to": "assigned", "trigger": "dispatch", "attempt": 1}, 1.0)
    ended, seconds = f.transition("m:1", {"from": "assigned", "to": "cancelled", "trigger": "cancel"}, 2.0)
    assert not f.task_start and not f.attempt and seconds is None  # (it was kept for good: a leak a task)
    assert ended is not None and ended.outcome == "interrupted"


def test_the_console_forgets_a_task_that_ends_cancelled() -> None:
    from polpo.console import ConsoleView

    view = ConsoleView()
    view.lines({"event": "agent:spawned", "taskId": "m:1", "data": {"attempt": 1}}, 1.0)
    view.lines({"event": "assessment:complete", "taskId": "m:1", "data": {"globalScore": 3.0}}, 2.0)
    assert view.lines({"event": "task:transition", "taskId": "m:1", "data": {"to": "cancelled"}}, 3.0) == []
    assert not view.scores and not view.running
