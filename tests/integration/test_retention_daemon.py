"""A daemon that runs for a year (issue 31): finished files leave the folder, a year later (the injected clock)
the store holds what its live missions and the calibration labels need, and a restart reads no file it knows."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

import anyio
import orjson
import pytest

from polpo.clock import FakeClock
from polpo.command_args import encode
from polpo.config import load_config
from polpo.daemon import Daemon
from tests.support.daemon import mission_json, running_daemon, shell_task, submit, write_config

pytestmark = pytest.mark.anyio


async def idle(d: Daemon) -> None:
    """Until the intake has handled every file it found (at most 10 s)."""
    assert d.intake is not None
    with anyio.fail_after(10):
        while not d.intake.idle:
            await anyio.sleep(0.01)


async def test_a_year_later_the_store_keeps_only_the_live_missions_and_the_labels(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, extra='[retention]\nfinished = "P1D"\ninterval = 0.2\n'
                                                  'export = "../removed.jsonl"\n'))
    clock = FakeClock(datetime.now(UTC))
    folder = cfg.missions_dir
    async with running_daemon(cfg, clock=clock) as (d, w):
        assert d.engine is not None and d.store is not None
        submit(cfg, "done.json", mission_json(shell_task("ok", "echo hi > out.txt")))
        submit(cfg, "labelled.json", mission_json(shell_task("ok", "true")))
        submit(cfg, "bad.json", "{not json")
        await w.wait_event("mission:filed", mission_id="done")
        await w.wait_event("mission:filed", mission_id="labelled")
        status, said = await d.engine.apply_command("override", encode("labelled:1", passed=False, reason="wrong",
                                                                         score=2, by="ann"))
        assert status == "done", said
        submit(cfg, "live.json", mission_json(shell_task("slow", "sleep 30")))
        await w.wait_event("agent:spawned", mission_id="live")
        submit(cfg, "live.json", mission_json(shell_task("slow", "sleep 31")))  # an edit while it runs: kept
        await w.wait_event("mission:rejected", mission_id="live")
        await w.wait_event("mission:rejected", mission_id="bad")
        assert sorted(p.name for p in folder.glob("*.json")) == ["bad.json", "live.json"]
        assert sorted(p.name for p in (folder / "done").iterdir()) == ["done.json", "labelled.json"]
        workspace = cfg.state_dir / "workspaces" / "done"
        assert (workspace / "out.txt").exists()

        clock.advance(365 * 86400)  # a year later
        pruned = await w.wait_for(lambda e: e.event == "retention:pruned" and e.data["missions"] > 0, 10)
        assert pruned.data["missions"] == 1 and pruned.data["exported"] == str(tmp_path / "removed.jsonl")
        assert not workspace.exists()
        assert await d.store.load_mission("done") is None
        assert await d.store.load_mission("labelled") is not None  # a calibration label: kept whole
        assert await d.store.load_mission("live") is not None
        assert [e.event for e in await d.store.events_after(0) if e.mission_id == "done"] == []
        exported = [orjson.loads(line) for line in (tmp_path / "removed.jsonl").read_bytes().splitlines()]
        assert [x["mission"] for x in exported] == ["done"]
        assert exported[0]["rows"]["missions"][0]["status"] == "completed"
        assert len(exported[0]["rows"]["tasks"]) == 1 and exported[0]["rows"]["events"]
        # the same file dropped again runs again (it left the folder when it finished)
        submit(cfg, "done.json", mission_json(shell_task("ok", "true")))
        await w.wait_event("mission:completed", mission_id="done")


async def test_a_finished_file_is_filed_between_two_turns_and_bytes_read_before_run_nothing(tmp_path: Path) -> None:
    """The filing waits while the intake handles a file; bytes of the file read before it was filed, handled after,
    start nothing (they started ``NAME#2`` under load: the first test of this file, 6 runs in 24)."""
    cfg = load_config(write_config(tmp_path, extra="[retention]\n"))
    async with running_daemon(cfg) as (d, w):
        assert d.intake is not None
        turn = d.intake.turn
        path = submit(cfg, "once.json", mission_json(shell_task("ok", "sleep 0.2")))
        await w.wait_event("agent:spawned", mission_id="once")
        async with turn:  # the intake is busy with another file
            await w.wait_event("mission:completed", mission_id="once")
            with anyio.fail_after(10):
                while turn.statistics().tasks_waiting < 1:  # the filing waits for its turn
                    await anyio.sleep(0.01)
            os.chmod(path, 0o644)  # an event: the file is read again, the same bytes, and waits too
            with anyio.fail_after(10):
                while turn.statistics().tasks_waiting < 2:
                    await anyio.sleep(0.01)
            assert path.exists() and not w.of("mission:filed")
        await w.wait_event("mission:filed", mission_id="once")
        submit(cfg, "after.json", mission_json(shell_task("ok", "true")))  # files are handled in order
        await w.wait_event("mission:completed", mission_id="after")
    assert not path.exists() and [e.mission_id for e in w.of("mission:accepted")] == ["once", "after"]


async def test_a_restart_reads_only_the_files_it_does_not_know_as_they_are(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, extra='[retention]\nfinished_files = "keep"\n'))
    path = submit(cfg, "kept.json", mission_json(shell_task("ok", "true")))
    async with running_daemon(cfg) as (d, w):
        await w.wait_event("mission:completed", mission_id="kept")
    assert path.exists()  # "keep": finished files stay in place
    hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(path, ns=(hour_ago, hour_ago))  # read right after it was written, its stamp was not trusted yet
    async with running_daemon(cfg) as (d, w):
        await idle(d)
        assert d.intake is not None and d.intake.handled == 1  # read once more, now stamped
        assert d.store is not None
        known = await d.store.source(str(path))
        assert known is not None and known.stamp is not None
    async with running_daemon(cfg) as (d, w):
        await idle(d)
        assert d.intake is not None and d.intake.handled == 0  # not read, not hashed
        submit(cfg, "kept.json", mission_json(shell_task("ok again", "true")))
        await w.wait_event("mission:completed", mission_id="kept#2")


async def test_a_schedules_file_stays_where_it_is_when_its_runs_finish(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, extra="[retention]\n"))  # the default: finished files move to done/
    path = submit(cfg, "every.json", mission_json(shell_task("tick", "true"), schedule="PT1S"))
    async with running_daemon(cfg) as (d, w):
        await w.wait_event("mission:completed", mission_id="every")
        await w.wait_event("mission:completed", mission_id="every#2")
        assert d.store is not None
        known = await d.store.source(str(path))
        assert known is not None and known.outcome == "scheduled" and known.mission_id == "every" and known.runs >= 2
    assert path.exists() and not (cfg.missions_dir / "done").exists() and not w.of("mission:filed")


async def test_a_file_edited_while_its_mission_ran_stays_with_its_new_bytes(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, extra="[retention]\n"))
    path = submit(cfg, "edited.json", mission_json(shell_task("slow", "sleep 1")))
    async with running_daemon(cfg) as (_d, w):
        await w.wait_event("agent:spawned", mission_id="edited")
        edit = mission_json(shell_task("slow", "sleep 2"))
        submit(cfg, "edited.json", edit)
        await w.wait_event("mission:rejected", mission_id="edited")  # busy: the running mission keeps its tasks
        await w.wait_event("mission:completed", mission_id="edited")
        submit(cfg, "other.json", mission_json(shell_task("ok", "true")))
        await w.wait_event("mission:filed", mission_id="other")  # (filed in order: "edited" had its turn)
    assert path.read_text() == edit and not w.of("mission:filed", mission_id="edited")
