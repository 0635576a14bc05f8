"""Reading the missions folder: regular files only, bounded reads, stable digests; and the watcher's settle."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import anyio
import pytest

from polpo.intake.reader import NOT_REGULAR, TOO_LARGE, UNREADABLE, Unreadable, read_mission_file
from polpo.intake.settle import UNPARSABLE_GRACE, Shape, settle, shape

DOC = json.dumps({"tasks": [{"title": "t", "description": "d"}]}).encode()


def test_regular_file_and_link_to_one_are_read(tmp_path: Path) -> None:
    f = tmp_path / "a.json"
    f.write_bytes(DOC)
    (tmp_path / "l.json").symlink_to(f)
    assert read_mission_file(f, 1024) == DOC
    assert read_mission_file(tmp_path / "l.json", 1024) == DOC
    assert read_mission_file(tmp_path / "missing.json", 1024) is None


@pytest.mark.parametrize(("make", "words"), [
    (lambda p, t: p.mkdir(), "a directory"),
    (lambda p, t: os.mkfifo(p), "a named pipe (FIFO)"),
    (lambda p, t: p.symlink_to(t), "a directory behind a symbolic link"),
    (lambda p, t: p.symlink_to(t / "nothing"), "a symbolic link to nothing"),
    (lambda p, t: p.symlink_to(p), "a symbolic link loop"),
])
def test_non_regular_entries_are_not_opened(tmp_path: Path, make, words: str) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "x.json"
    make(p, tmp_path)
    got = read_mission_file(p, 1024)
    assert isinstance(got, Unreadable) and got.reason == NOT_REGULAR
    assert words in got.message
    assert read_mission_file(p, 1024) == got  # the same state, the same digest: rejected once


def test_too_large_is_not_read_and_the_digest_follows_the_file(tmp_path: Path) -> None:
    p = tmp_path / "big.json"
    p.write_bytes(b" " * 2000)
    got = read_mission_file(p, 1024)
    assert isinstance(got, Unreadable) and got.reason == TOO_LARGE and "2000 bytes" in got.message
    assert read_mission_file(p, 1024) == got
    p.write_bytes(b" " * 3000)
    again = read_mission_file(p, 1024)
    assert isinstance(again, Unreadable) and again.digest != got.digest
    assert read_mission_file(p, 3000) == b" " * 3000


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(tmp_path: Path) -> None:
    p = tmp_path / "secret.json"
    p.write_bytes(DOC)
    p.chmod(0)
    got = read_mission_file(p, 1024)
    assert isinstance(got, Unreadable) and got.reason == UNREADABLE


@pytest.mark.parametrize(("raw", "expected"), [
    (DOC, Shape.COMPLETE),
    (b"\xef\xbb\xbf" + DOC, Shape.COMPLETE),
    (b"", Shape.INCOMPLETE),
    (b"  \n", Shape.INCOMPLETE),
    (DOC[:10], Shape.INCOMPLETE),
    ('{"t": "caf\u00e9"}'.encode()[:12], Shape.INCOMPLETE),  # cut inside a UTF-8 character
    (b'{"tasks": ]', Shape.BROKEN),
    (DOC + b"x", Shape.BROKEN),
])
def test_shape(raw: bytes, expected: Shape) -> None:
    assert shape(raw) is expected


@pytest.mark.anyio
async def test_settle_waits_for_a_slow_writer_that_pauses_longer_than_the_broken_file_grace(tmp_path: Path) -> None:
    p = tmp_path / "slow.json"
    p.write_bytes(DOC[:15])
    finished = threading.Event()

    async def finish() -> None:
        await anyio.sleep(UNPARSABLE_GRACE * 1.5)
        p.write_bytes(DOC)
        finished.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(finish)
        got = await settle(p, 1024)
    assert finished.is_set() and got == DOC


@pytest.mark.anyio
async def test_settle_hands_over_a_directory_at_once(tmp_path: Path) -> None:
    (tmp_path / "d.json").mkdir()
    got = await settle(tmp_path / "d.json", 1024)
    assert isinstance(got, Unreadable) and got.reason == NOT_REGULAR
