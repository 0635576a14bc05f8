"""The watched folder: bad files rejected and kept, duplicates ignored, edits handled as documented."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import anyio
import pytest

from polpo.config import load_config
from tests.support.daemon import mission_json, running_daemon, shell_task, submit, write_config

pytestmark = pytest.mark.anyio

INVALID = {
    "not-json.json": "this is not json",
    "truncated.json": '{"tasks": [{"title": "a", "description": "b", "assignTo": "shell"',
    "wrong-types.json": '{"tasks": [{"title": 3, "description": "b", "assignTo": "shell", "priority": "high"}]}',
    "unknown-key.json": '{"tasks": [{"title": "a", "description": "b", "assignTo": "shell", "dependOn": []}]}',
    "unknown-agent.json": '{"tasks": [{"title": "a", "description": "b", "assignTo": "nobody"}]}',
    "cycle.json": mission_json(shell_task("a", "true", dependsOn=["b"]), shell_task("b", "true", dependsOn=["a"])),
    "bad-gate.json": mission_json(shell_task("a", "true"), qualityGates=[
        {"name": "g", "afterTasks": ["missing"], "blocksTasks": ["a"]}]),
    "duplicate-titles.json": mission_json(shell_task("a", "true"), shell_task("a", "true")),
    "empty-tasks.json": '{"tasks": []}',
}


@pytest.fixture
def cfg(tmp_path: Path):  # type: ignore[no-untyped-def]
    return load_config(write_config(tmp_path))


async def test_invalid_files_are_rejected_kept_and_the_daemon_keeps_working(cfg) -> None:  # type: ignore[no-untyped-def]
    async with running_daemon(cfg) as (_, w):
        for name, text in INVALID.items():
            (cfg.missions_dir / name).write_text(text)
        for name in INVALID:
            await w.wait_for(lambda e, n=name: e.event == "mission:rejected" and e.data["file"].endswith("/" + n))
        submit(cfg, "good.json", mission_json(shell_task("ok", "true")))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    for name, text in INVALID.items():
        assert (cfg.missions_dir / name).read_text() == text, f"{name} was changed"
        ev = next(e for e in w.of("mission:rejected") if e.data["file"].endswith("/" + name))
        assert ev.data["errors"], name
        assert all(line.startswith(str(cfg.missions_dir / name) + ": $") for line in ev.data["lines"])
    by_file = {Path(e.data["file"]).name: e.data["errors"] for e in w.of("mission:rejected")}
    assert any("cycle" in err["message"] for err in by_file["cycle.json"])
    assert any(err["path"] == "$.tasks[0].assignTo" for err in by_file["unknown-agent.json"])
    assert any(err["path"].startswith("$.qualityGates[0].afterTasks") for err in by_file["bad-gate.json"])


async def test_dot_and_temp_files_are_ignored(cfg) -> None:  # type: ignore[no-untyped-def]
    async with running_daemon(cfg) as (_, w):
        (cfg.missions_dir / ".hidden.json").write_text("not json")
        (cfg.missions_dir / "x.json.tmp").write_text("not json")
        (cfg.missions_dir / "notes.txt").write_text("hello")
        submit(cfg, "real.json", mission_json(shell_task("ok", "true")))
        await w.wait_event("mission:completed")
    assert not w.of("mission:rejected")
    assert len(w.of("mission:accepted")) == 1


async def test_same_bytes_again_start_nothing(cfg) -> None:  # type: ignore[no-untyped-def]
    text = mission_json(shell_task("ok", "true"))
    async with running_daemon(cfg) as (d, w):
        path = submit(cfg, "same.json", text)
        await w.wait_event("mission:completed")
        assert d.intake is not None
        handled = d.intake.handled
        for _ in range(3):  # an editor's re-saves of identical bytes
            path.write_text(text)
            os.utime(path)
        # a file written after the re-saves: once it is taken and nothing is pending, the re-saves were read too
        submit(cfg, "after.json", mission_json(shell_task("after", "true")))
        await w.wait_event("mission:accepted", mission_id="after")
        with anyio.fail_after(10):
            while not d.intake.idle:
                await anyio.sleep(0.01)
        assert d.intake is not None and d.intake.handled >= handled + 2  # the re-saves were read, not missed
    assert [e.mission_id for e in w.of("mission:accepted")] == ["same", "after"]


async def test_edit_while_running_is_rejected_then_a_later_save_starts_run_2(cfg) -> None:  # type: ignore[no-untyped-def]
    first = mission_json(shell_task("wait", "while [ ! -f release ]; do sleep 0.05; done"))
    second = mission_json(shell_task("second version", "true"))
    async with running_daemon(cfg) as (_, w):
        path = submit(cfg, "edit.json", first)
        await w.wait_event("agent:spawned")
        submit(cfg, "edit.json", second)
        busy = await w.wait_event("mission:rejected")
        assert busy.data["reason"] == "still running"
        assert "polpo cancel edit" in busy.data["errors"][0]["message"]
        (cfg.state_dir / "workspaces" / "edit" / "release").write_text("")
        await w.wait_event("mission:completed", mission_id="edit")
        assert path.read_text() == second  # the file is left as the user saved it
        os.utime(path)  # save again (same bytes) after it finished -> a new run
        done2 = await w.wait_event("mission:completed", mission_id="edit#2")
    assert done2.data["outcome"] == "completed"
    acc = w.of("mission:accepted")
    assert [e.mission_id for e in acc] == ["edit", "edit#2"]
    assert acc[1].data["hash"] == hashlib.sha256(second.encode()).hexdigest()
    assert acc[1].data["run"] == 2


async def test_files_added_while_down_are_picked_up_at_start(cfg) -> None:  # type: ignore[no-untyped-def]
    (cfg.missions_dir / "early.json").write_text(mission_json(shell_task("ok", "true")))
    async with running_daemon(cfg) as (_, w):
        done = await w.wait_event("mission:completed")
    assert done.mission_id == "early"


async def test_a_folder_full_of_files_at_start_is_read_by_a_few_workers(cfg) -> None:  # type: ignore[no-untyped-def]
    """More files than SCAN_WORKERS at start (a first start on a folder of finished files): each is taken in
    once, by a few workers rather than a task a file, and the intake says it is idle only once they are all in."""
    from polpo.intake.watcher import SCAN_WORKERS

    names = [f"f{i:02}" for i in range(SCAN_WORKERS + 8)]
    for name in names:
        (cfg.missions_dir / f"{name}.json").write_text(mission_json(shell_task("ok", "true")))
    async with running_daemon(cfg) as (d, w):
        assert d.intake is not None
        with anyio.fail_after(60):
            while not d.intake.idle:
                await anyio.sleep(0.01)
        assert sorted(e.mission_id for e in w.of("mission:accepted")) == names  # each once
        assert d.intake.handled >= len(names) and not w.of("mission:rejected")


async def test_slow_writer_is_read_once_whole(cfg) -> None:  # type: ignore[no-untyped-def]
    text = mission_json(*[shell_task(f"t{i}", "true") for i in range(30)]).encode()
    async with running_daemon(cfg) as (_, w):
        with open(cfg.missions_dir / "slow.json", "wb") as f:
            for i in range(0, len(text), len(text) // 3 + 1):
                f.write(text[i:i + len(text) // 3 + 1])
                f.flush()
                await anyio.sleep(0.3)
        done = await w.wait_event("mission:completed")
    assert done.data["report"]["tasks"]["total"] == 30
    assert not w.of("mission:rejected")
    assert len(w.of("mission:accepted")) == 1
