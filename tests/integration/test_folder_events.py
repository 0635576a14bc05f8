"""The missions folder's events (polpo.intake.folder_events) on a real folder: inotify where it works, watchfiles
for ``force_polling``; and the intake over them: a file seen at once, a folder removed made again, events lost
read by a scan."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncGenerator
from pathlib import Path

import anyio
import pytest

from polpo.intake.filing import file_away
from polpo.intake.folder_events import Batch, FolderGone, inotify_events, watchfiles_events
from polpo.intake.settle import Content
from polpo.intake.watcher import Intake, is_mission_file

pytestmark = pytest.mark.anyio


async def next_batch(events: AsyncGenerator[Batch, None], timeout: float = 10) -> Batch:
    with anyio.fail_after(timeout):
        return await anext(events)


async def test_inotify_names_each_mission_file_that_arrives_and_nothing_else(tmp_path: Path) -> None:
    events = inotify_events(tmp_path, is_mission_file)
    try:
        assert await next_batch(events) == []  # live: the intake scans now
        (tmp_path / ".tmp.json.part").write_text("{}")  # a temp file, renamed into place as polpo submit does
        os.rename(tmp_path / ".tmp.json.part", tmp_path / "a.json")
        assert await next_batch(events) == [tmp_path / "a.json"]
        (tmp_path / "b.json").write_text("{}")  # written in place: made, written, closed; one name per batch
        (tmp_path / "notes.txt").write_text("not a mission")
        assert await next_batch(events) == [tmp_path / "b.json"]
        os.utime(tmp_path / "a.json")  # touched: saved again
        assert await next_batch(events) == [tmp_path / "a.json"]
    finally:
        await events.aclose()


async def test_a_lost_event_queue_asks_for_a_scan_and_a_removed_folder_ends_the_watch(tmp_path: Path) -> None:
    folder = tmp_path / "missions"
    folder.mkdir()
    events = inotify_events(folder, is_mission_file)
    try:
        assert await next_batch(events) == []
        limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
        for i in range(limit // 2 + 10):  # two events each (made, closed): more than the kernel queues
            (folder / f"f{i}.json").touch()
        assert await next_batch(events) is None  # the queue overflowed: the intake reads the folder instead
        for path in folder.iterdir():
            path.unlink()
        batches = []
        with pytest.raises(FolderGone):
            folder.rmdir()
            for _ in range(100):
                batches.append(await next_batch(events))
        assert all(b == [] or b is None or all(p.parent == folder for p in b) for b in batches)
    finally:
        await events.aclose()


async def test_watchfiles_still_serves_force_polling(tmp_path: Path) -> None:
    stop = anyio.Event()
    events = watchfiles_events(tmp_path, stop, force_polling=True, wanted=is_mission_file)
    try:
        assert await next_batch(events) == []
        (tmp_path / "p.json").write_text("{}")
        assert tmp_path / "p.json" in (await next_batch(events) or [])
        stop.set()
        with pytest.raises(StopAsyncIteration):
            await next_batch(events)
    finally:
        await events.aclose()


@pytest.mark.parametrize("force_polling", [False, True])
async def test_the_intake_takes_a_dropped_file_in_and_a_removed_folder_is_made_again(
        tmp_path: Path, force_polling: bool) -> None:
    folder = tmp_path / "missions"
    seen: list[tuple[str, bytes]] = []

    async def handler(path: Path, content: Content, _stamp: str | None) -> None:
        assert isinstance(content, bytes)
        seen.append((path.name, content))

    intake = Intake(folder, handler, force_polling=force_polling)

    def names() -> list[str]:  # (a file that arrives as the watch starts is read by both: the handler de-dups)
        return list(dict.fromkeys(name for name, _ in seen))

    async def until(n: int) -> None:
        with anyio.fail_after(20):
            while len(names()) < n:
                await anyio.sleep(0.01)

    async with anyio.create_task_group() as tg:
        tg.start_soon(intake.run)
        with anyio.fail_after(20):
            await intake.ready.wait()
        (folder / "one.json").write_bytes(b'{"tasks": []}')
        await until(1)
        if not force_polling:  # (watchfiles' polling of a removed folder is its own affair)
            (folder / "one.json").unlink()
            folder.rmdir()
            with anyio.fail_after(20):
                while not folder.is_dir():
                    await anyio.sleep(0.01)
            await anyio.sleep(0.2)  # the new watch is live once the folder is scanned again
            (folder / "two.json").write_bytes(b'{"tasks": [1]}')
            await until(2)
        intake.stop()
    assert names() == (["one.json"] if force_polling else ["one.json", "two.json"])
    assert dict(seen) == ({"one.json": b'{"tasks": []}'} if force_polling else
                          {"one.json": b'{"tasks": []}', "two.json": b'{"tasks": [1]}'})


async def test_bytes_read_before_their_file_was_filed_are_not_handed_over_after(tmp_path: Path) -> None:
    """A second read of the same bytes (a touch, the watch's first scan) waits its turn while the first is handled;
    when the file is filed meanwhile (its record then matches no bytes), handing those bytes over would start the
    mission again as ``NAME#2`` (seen in test_retention_daemon under load: 6 runs in 24)."""
    folder = tmp_path / "missions"
    raw = b'{"tasks": []}'
    seen: list[bytes] = []
    second_read = anyio.Event()

    async def handler(path: Path, content: Content, _stamp: str | None) -> None:
        assert isinstance(content, bytes)
        seen.append(content)
        if len(seen) == 1:
            os.chmod(path, 0o644)  # an event that changes nothing the key holds: the file is read again
            with anyio.fail_after(10):
                await second_read.wait()
            assert file_away(path, hashlib.sha256(content).hexdigest(), 1) is not None  # filed, as after its run

    intake = Intake(folder, handler)
    async with anyio.create_task_group() as tg:
        tg.start_soon(intake.run)
        with anyio.fail_after(20):
            await intake.ready.wait()
        (folder / ".a.json.tmp").write_bytes(raw)
        os.rename(folder / ".a.json.tmp", folder / "a.json")
        with anyio.fail_after(10):
            while intake.turn.statistics().tasks_waiting == 0:  # the second read waits for the first's turn
                await anyio.sleep(0.01)
        second_read.set()
        with anyio.fail_after(10):
            while not intake.idle:
                await anyio.sleep(0.01)
        intake.stop()
    assert seen == [raw]
    assert (folder / "done" / "a.json").read_bytes() == raw
