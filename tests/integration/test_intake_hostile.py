"""Files that used to stop the daemon (issue C1–C5 and friends), each dropped into a running daemon.

For every one: exactly one ``mission:rejected`` with a reason, the file left exactly as it was, a valid
mission dropped afterwards still runs, and a restart on the same state neither dies nor rejects it again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from polpo.config import Config, load_config
from tests.support.daemon import EventWaiter, mission_json, running_daemon, shell_task, submit, write_config

pytestmark = pytest.mark.anyio

GOOD = mission_json(shell_task("ok", "true"))


def _snapshot(path: Path) -> tuple[object, ...]:
    """What the entry is, byte for byte: a file's bytes, a link's target, a directory's listing."""
    if path.is_symlink():
        return ("link", os.readlink(path))
    if path.is_dir():
        return ("dir", sorted(os.listdir(path)))
    if path.is_fifo():
        return ("fifo",)
    return ("file", path.read_bytes())


def _rejections(w: EventWaiter, name: str) -> list[dict[str, object]]:
    return [e.data for e in w.of("mission:rejected") if str(e.data["file"]).endswith("/" + name)]


async def _drop_and_restart(cfg: Config, name: str, make: Callable[[Path], None], sentinel: str) -> dict[str, object]:
    """Drop the entry ``name`` (made by ``make``); return its one rejection after checking the daemon, the file
    and a restart. ``sentinel`` is made the same way after the restart: once it is rejected, the start-up scan
    has handled ``name`` too (same kind of entry, same settle time, scanned earlier)."""
    path = cfg.missions_dir / name
    async with running_daemon(cfg) as (_, w):
        make(path)
        await w.wait_for(lambda e: e.event == "mission:rejected" and str(e.data["file"]).endswith("/" + name))
        before = _snapshot(path)
        submit(cfg, "good.json", GOOD)
        done = await w.wait_event("mission:completed", mission_id="good")
    assert done.data["outcome"] == "completed"
    [rejection] = _rejections(w, name)
    assert _snapshot(path) == before
    async with running_daemon(cfg) as (_, w2):
        make(cfg.missions_dir / sentinel)
        await w2.wait_for(lambda e: e.event == "mission:rejected" and str(e.data["file"]).endswith("/" + sentinel))
        submit(cfg, "good2.json", GOOD)
        again = await w2.wait_event("mission:completed", mission_id="good2")
    assert again.data["outcome"] == "completed"
    assert _rejections(w2, name) == [], "a restart rejected the file again"
    assert _snapshot(path) == before
    return rejection


def _writer(data: bytes) -> Callable[[Path], None]:
    return lambda p: p.write_bytes(data)


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return load_config(write_config(tmp_path))


C1_SURROGATE = b'{"tasks":[{"title":"x","assignTo":"\\ud800"}]}'


async def test_c1_lone_surrogate_is_rejected_with_its_path(cfg: Config) -> None:
    assert len(C1_SURROGATE) == 45  # the file, byte for byte
    rej = await _drop_and_restart(cfg, "c1.json", _writer(C1_SURROGATE), "c1-again.json")
    assert rej["reason"] == "invalid"
    assert rej["errors"] == [{"path": "$.tasks[0].assignTo", "message": rej["errors"][0]["message"]}]  # type: ignore[index]
    assert "lone UTF-16 surrogate" in rej["errors"][0]["message"]  # type: ignore[index]


async def test_c2_bom_mission_runs_and_resumes_after_a_stop(cfg: Config) -> None:
    wait = "while [ ! -f release ]; do sleep 0.05; done"
    raw = b"\xef\xbb\xbf" + mission_json(shell_task("waits", wait), shell_task("after", "true", dependsOn=["waits"])
                                         ).encode()
    async with running_daemon(cfg) as (_, w):
        (cfg.missions_dir / "bom.json").write_bytes(raw)
        await w.wait_event("agent:spawned", task_id="bom:1")
    async with running_daemon(cfg) as (_, w2):  # recovery reads the stored spec back
        (cfg.state_dir / "workspaces" / "bom" / "release").write_text("")
        done = await w2.wait_event("mission:completed", mission_id="bom")
    assert done.data["outcome"] == "completed"
    assert not w.of("mission:rejected") and not w2.of("mission:rejected")
    assert (cfg.missions_dir / "bom.json").read_bytes() == raw


@pytest.mark.parametrize("field", ["title", "description"])
async def test_c3_nul_in_a_string_is_rejected(cfg: Config, field: str) -> None:
    task = shell_task("x", "true")
    task[field] = "before\u0000after"
    rej = await _drop_and_restart(cfg, "c3.json", _writer(mission_json(task).encode()), "c3-again.json")
    assert rej["reason"] == "invalid"
    [err] = rej["errors"]  # type: ignore[misc]
    assert err["path"] == f"$.tasks[0].{field}"
    assert "NUL" in err["message"]


async def test_c4_integer_beyond_64_bits_is_rejected(cfg: Config) -> None:
    raw = mission_json(shell_task("x", "false", maxRetries=10**30)).encode()
    rej = await _drop_and_restart(cfg, "c4.json", _writer(raw), "c4-again.json")
    [err] = rej["errors"]  # type: ignore[misc]
    assert err["path"] == "$.tasks[0].maxRetries"
    assert "out of range" in err["message"]


async def test_c4_retry_count_in_range_but_over_the_bound_is_rejected(cfg: Config) -> None:
    raw = mission_json(shell_task("x", "false", maxRetries=2**53)).encode()
    rej = await _drop_and_restart(cfg, "c4b.json", _writer(raw), "c4b-again.json")
    assert rej["errors"][0]["path"] == "$.tasks[0].maxRetries"  # type: ignore[index]


async def test_c5_directory_named_json_is_rejected_once(cfg: Config) -> None:
    rej = await _drop_and_restart(cfg, "d.json", lambda p: p.mkdir(), "d-again.json")
    assert rej["reason"] == "not a regular file"
    assert "directory" in rej["errors"][0]["message"]  # type: ignore[index]


async def test_c5_symlink_to_a_directory_is_rejected_once(cfg: Config, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    rej = await _drop_and_restart(cfg, "link.json", lambda p: p.symlink_to(tmp_path / "elsewhere"), "link2.json")
    assert rej["reason"] == "not a regular file"
    assert "directory behind a symbolic link" in rej["errors"][0]["message"]  # type: ignore[index]


async def test_fifo_named_json_is_rejected_without_being_opened(cfg: Config) -> None:
    rej = await _drop_and_restart(cfg, "pipe.json", lambda p: os.mkfifo(p), "pipe2.json")
    assert rej["reason"] == "not a regular file"
    assert "FIFO" in rej["errors"][0]["message"]  # type: ignore[index]


async def test_dangling_symlink_is_rejected_once(cfg: Config, tmp_path: Path) -> None:
    rej = await _drop_and_restart(cfg, "gone.json", lambda p: p.symlink_to(tmp_path / "nothing"), "gone2.json")
    assert rej["reason"] == "not a regular file"


async def test_file_name_that_is_not_utf8_is_rejected(cfg: Config) -> None:
    def make(p: Path) -> None:
        p.write_bytes(GOOD.encode())

    name = os.fsdecode(b"caf\xe9.json")  # Latin-1 bytes: a lone surrogate in Python's view of the name
    path = cfg.missions_dir / name
    async with running_daemon(cfg) as (_, w):
        make(path)
        ev = await w.wait_event("mission:rejected")
        submit(cfg, "good.json", GOOD)
        await w.wait_event("mission:completed", mission_id="good")
    assert ev.data["file"].endswith("/caf\\udce9.json")
    assert "not valid UTF-8" in ev.data["errors"][0]["message"]
    async with running_daemon(cfg) as (_, w2):
        make(cfg.missions_dir / os.fsdecode(b"caf\xe8.json"))
        await w2.wait_for(lambda e: e.event == "mission:rejected" and "udce8" in e.data["file"])
    assert [e.data["file"] for e in w2.of("mission:rejected")] == [str(cfg.missions_dir / "caf\\udce8.json")]
    assert path.read_bytes() == GOOD.encode()


async def test_file_over_the_size_limit_is_rejected_unread(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    config.write_text(config.read_text().replace("[daemon]\n", "[daemon]\nmax_mission_bytes = 2048\n", 1))
    cfg = load_config(config)
    big = mission_json(shell_task("x", "true" + " " * 4000)).encode()
    rej = await _drop_and_restart(cfg, "big.json", _writer(big), "big2.json")
    assert rej["reason"] == "too large"
    assert "2048" in rej["errors"][0]["message"]  # type: ignore[index]


async def test_an_error_inside_polpo_rejects_that_file_and_is_stored(cfg: Config) -> None:
    # the workspace (inside the allowed root) cannot be created, its parent being a file: admission raises,
    # the file is failed alone
    plain = cfg.state_dir / "workspaces" / "plain-file"
    plain.parent.mkdir(parents=True, exist_ok=True)
    plain.write_text("")
    raw = mission_json(shell_task("x", "true"), workspace=str(plain / "ws")).encode()
    rej = await _drop_and_restart(cfg, "ws.json", _writer(raw), "ws2.json")
    assert rej["reason"] == "internal error"
    assert "NotADirectoryError" in rej["errors"][0]["message"]  # type: ignore[index]


async def test_many_problems_are_capped_in_the_event(cfg: Config) -> None:
    tasks = [{"title": f"t{i}", "description": "x", "assignTo": "nobody"} for i in range(300)]
    rej = await _drop_and_restart(cfg, "many.json", _writer(mission_json(*tasks).encode()), "many2.json")
    assert len(rej["errors"]) == 50 and len(rej["lines"]) == 50  # type: ignore[arg-type]
    assert rej["more"] == 250


async def test_a_writer_pausing_longer_than_a_second_between_chunks_is_not_rejected(cfg: Config) -> None:
    text = mission_json(*[shell_task(f"t{i}", "true") for i in range(5)]).encode()
    third = len(text) // 3 + 1
    async with running_daemon(cfg) as (_, w):
        with open(cfg.missions_dir / "slow.json", "wb") as f:
            for i in range(0, len(text), third):
                f.write(text[i:i + third])
                f.flush()
                await anyio.sleep(1.5)
        done = await w.wait_event("mission:completed", mission_id="slow")
    assert done.data["report"]["tasks"]["total"] == 5
    assert not w.of("mission:rejected")
