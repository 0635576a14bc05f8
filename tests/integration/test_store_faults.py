"""Faults of the state store: a full disk pauses work and loses nothing; a faulty transaction is dropped alone;
a state folder that cannot be used is one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from polpo.config import load_config
from tests.support.daemon import mission_json, run_cli, running_daemon, shell_task, submit, write_config

pytestmark = pytest.mark.anyio


async def test_a_full_disk_pauses_new_work_and_it_resumes_with_nothing_lost(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path))
    async with running_daemon(cfg) as (d, w):
        submit(cfg, "warm.json", mission_json(shell_task("w", "true")))
        await w.wait_event("mission:completed", mission_id="warm")
        assert d.store is not None
        db = d.store.writer  # type: ignore[attr-defined]  # the connection that writes (max_page_count is its own)
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count={pages}")  # SQLite now refuses to grow: "database or disk is full"
        tasks = [shell_task(f"t{i}", f"echo {i} > f{i}.txt # {'x' * 300}") for i in range(200)]
        submit(cfg, "big.json", mission_json(*tasks))
        with anyio.fail_after(20):
            while d.store.unavailable is None:
                await anyio.sleep(0.02)
        assert "database or disk is full" in d.store.unavailable
        spawned_while_full = len(w.of("agent:spawned"))
        db.execute("PRAGMA max_page_count=1073741823")  # space is back
        done = await w.wait_event("mission:completed", mission_id="big", timeout=60)
        assert d.store.unavailable is None
    assert spawned_while_full == 1  # only the warm-up's agent: nothing of the big mission started while full
    assert done.data["report"]["tasks"] == {"total": 200, "done": 200, "failed": 0}
    lines = [json.loads(x) for x in (cfg.state_dir / "events.jsonl").read_text().splitlines()]
    seqs = [e["seq"] for e in lines]
    assert seqs == list(range(1, len(seqs) + 1))  # no event lost or numbered twice across the pause


def test_a_state_folder_that_cannot_be_used_is_one_clear_line(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    (tmp_path / "blocker").write_text("a file where the state folder should be")
    text = config.read_text().replace('state_dir = "../state"', 'state_dir = "../blocker/state"')
    config.write_text(text)
    r = run_cli("daemon", "--config", str(config), timeout=30)
    assert r.returncode == 1
    assert "cannot use the state folder" in r.stderr and "Traceback" not in r.stderr
    assert len([ln for ln in r.stderr.splitlines() if ln.startswith("polpo: cannot use")]) == 1
