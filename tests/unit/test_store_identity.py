"""The store's identity against the event log: the pure rule, and the position file that carries it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polpo.events.catalog import Event
from polpo.events.log import EventLog
from polpo.store.identity import Adopt, Match, Refuse, StoreMismatch, decide, verify

A = "0b6c2a9e-6f1d-4c35-9a51-2f0e1d7c9b11"
B = "7d3e8f10-2a4b-4c6d-8e9f-0a1b2c3d4e5f"


def ev(seq: int) -> Event:
    return Event(seq, "2026-01-01T00:00:00.000Z", "task:fix", "m", f"m:{seq}", {})


@pytest.mark.parametrize(("store_id", "store_seq", "log_id", "log_seq", "verdict"), [
    (A, 0, None, 0, Adopt()),  # a first start: nothing recorded yet
    (A, 40, None, 40, Adopt()),  # a position file from before identities, the store up to date: adopted
    (A, 45, None, 40, Adopt()),  # ... or ahead (a crash between a commit and the log's write)
    (A, 40, A, 40, Match()),  # a normal restart
    (A, 45, A, 40, Match()),  # the log is caught up after
])
def test_a_store_the_log_was_written_from_goes_on(store_id: str, store_seq: int, log_id: str | None,
                                                   log_seq: int, verdict: Match | Adopt) -> None:
    assert decide(store_id, store_seq, log_id, log_seq) == verdict


def test_an_empty_store_beside_a_log_with_events_is_refused_whatever_the_position_file_records() -> None:
    assert decide(B, 0, None, 1234) == Refuse("this store holds no events; the log has events up to 1234")
    assert isinstance(decide(B, 0, A, 1234), Refuse)


def test_an_older_copy_of_the_same_store_is_refused() -> None:
    assert decide(A, 30, A, 40) == Refuse("this store holds events up to 30; the log has events up to 40")


def test_another_stores_database_is_refused_even_when_it_holds_more_events() -> None:
    verdict = decide(B, 500, A, 40)
    assert isinstance(verdict, Refuse)
    assert B in verdict.why and A in verdict.why and "500" in verdict.why and "40" in verdict.why


def test_the_position_file_carries_the_identity_across_restarts(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    verify(A, 0, "test store", log)  # a first start records the identity at once
    assert (tmp_path / "events.jsonl.pos").read_text().split() == [A, "0"]
    log.write_many([ev(1), ev(2), ev(10)])
    log.close()
    assert (tmp_path / "events.jsonl.pos").read_text().split() == [A, "10"]
    again = EventLog(tmp_path / "events.jsonl")
    assert (again.store_id, again.last_seq) == (A, 10)
    again.close()


def test_a_position_file_from_before_identities_is_adopted_once(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps({"seq": s, "ts": "t", "event": "x", "data": {}}) + "\n" for s in (1, 2, 3)))
    (tmp_path / "events.jsonl.pos").write_text("3\n".ljust(21))  # the format written before identities
    log = EventLog(path)
    assert (log.store_id, log.last_seq) == (None, 3)
    verify(A, 3, "test store", log)
    log.close()
    assert (tmp_path / "events.jsonl.pos").read_text().split() == [A, "3"]
    with pytest.raises(StoreMismatch):  # from now on another store is refused
        verify(B, 3, "test store", EventLog(path))


def test_a_refused_store_leaves_the_log_and_its_position_file_as_they_were(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    verify(A, 0, "test store", log)
    log.write_many([ev(1), ev(2)])
    before = (tmp_path / "events.jsonl").read_bytes(), (tmp_path / "events.jsonl.pos").read_bytes()
    with pytest.raises(StoreMismatch) as err:
        verify(B, 0, "/s/polpo.db", log)
    log.close()
    assert ((tmp_path / "events.jsonl").read_bytes(), (tmp_path / "events.jsonl.pos").read_bytes()) == before
    text = str(err.value)
    assert "the store /s/polpo.db is not the one" in text and "--archive-log" in text and "Restore" in text


def test_archiving_moves_the_log_aside_and_begins_a_new_one_for_this_store(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    verify(A, 0, "test store", log)
    log.write_many([ev(1), ev(2)])
    verify(B, 0, "test store", log, archive_log=True)
    log.write_many([ev(1)])  # the new store numbers from 1 again: the new log takes it
    log.close()
    [old] = [p for p in tmp_path.iterdir() if p.name.startswith("events.jsonl.") and not p.name.endswith(".pos")]
    assert [json.loads(x)["seq"] for x in old.read_text().splitlines()] == [1, 2]
    assert (tmp_path / f"{old.name}.pos").read_text().split() == [A, "2"]
    assert [json.loads(x)["seq"] for x in (tmp_path / "events.jsonl").read_text().splitlines()] == [1]
    assert (tmp_path / "events.jsonl.pos").read_text().split() == [B, "1"]


def test_archive_log_with_a_matching_store_archives_nothing(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    verify(A, 0, "test store", log)
    log.write_many([ev(1)])
    verify(A, 1, "test store", log, archive_log=True)
    log.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl", "events.jsonl.pos"]
