"""events.jsonl: batched lines, catch-up without duplicates, rotation, and reading its end quickly."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from polpo.cli.tail_cmd import last_lines
from polpo.events.catalog import Event
from polpo.events.log import EventLog


def ev(seq: int, **data: object) -> Event:
    return Event(seq, "2026-01-01T00:00:00.000Z", "task:fix", "m", f"m:{seq}", dict(data))


def seqs(path: Path) -> list[int]:
    return [json.loads(line)["seq"] for line in path.read_text().splitlines()]


def test_a_batch_is_written_in_order_once_and_lines_are_valid_json(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    log.write_many([ev(1, attempt=1), ev(2, attempt=2)])
    log.write_many([ev(2), ev(3, note="a\\nb")])  # seq 2 again: a catch-up never duplicates
    log.close()
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert [json.loads(x)["seq"] for x in lines] == [1, 2, 3]
    assert json.loads(lines[0]) == {"seq": 1, "ts": "2026-01-01T00:00:00.000Z", "event": "task:fix",
                                    "missionId": "m", "taskId": "m:1", "data": {"attempt": 1}}


def test_a_moved_log_is_noticed_and_the_next_lines_go_to_a_new_file(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog(path)
    log.write_many([ev(1), ev(2)])
    os.rename(path, tmp_path / "events.jsonl.1")  # logrotate
    log.write_many([ev(3)])
    assert seqs(tmp_path / "events.jsonl.1") == [1, 2]
    assert seqs(path) == [3]
    assert log.reopens == 1
    log.close()


def test_after_a_rotation_a_restart_appends_only_what_the_log_lacks(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog(path)
    log.write_many([ev(1), ev(2), ev(3)])
    log.close()
    os.rename(path, tmp_path / "events.jsonl.1")
    again = EventLog(path)  # a restart: the new file is empty, the position file remembers seq 3
    assert again.last_seq == 3
    again.write_many([ev(1), ev(2), ev(3), ev(4)])  # the store's catch-up offers everything it has
    again.close()
    assert seqs(path) == [4]


def test_a_torn_last_line_is_terminated_before_the_next_write(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"seq":1,"ts":"t","event":"x","data":{}}\n{"seq":2,"ts"')
    log = EventLog(path)
    assert log.last_seq == 1
    log.write_many([ev(2)])
    log.close()
    lines = path.read_bytes().split(b"\n")
    assert lines[1] == b'{"seq":2,"ts"' and json.loads(lines[2])["seq"] == 2


@pytest.mark.parametrize("chunk", [7, 64, 1 << 16])
def test_last_lines_reads_backwards_whatever_the_chunk_size(chunk: int) -> None:
    body = b"".join(f'{{"seq":{i},"missionId":"{"a" if i % 3 else "b"}"}}\n'.encode() for i in range(1, 101))
    f = io.BytesIO(body + b'{"seq":101,"mis')  # a torn line at the end is not shown
    got = last_lines(f, 5, lambda raw: True, chunk=chunk)
    assert [json.loads(x)["seq"] for x in got] == [96, 97, 98, 99, 100]
    assert f.tell() == len(body)  # following starts after the last complete line
    only_b = last_lines(io.BytesIO(body), 4, lambda raw: b'"b"' in raw, chunk=chunk)
    assert [json.loads(x)["seq"] for x in only_b] == [90, 93, 96, 99]
    assert last_lines(io.BytesIO(b""), 5, lambda raw: True, chunk=chunk) == []
    everything = last_lines(io.BytesIO(body), 1000, lambda raw: True, chunk=chunk)
    assert len(everything) == 100 and everything[0].startswith(b'{"seq":1,')
