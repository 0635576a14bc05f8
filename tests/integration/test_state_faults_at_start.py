"""A daemon that cannot open its state at start-up says why and exits, so its service manager can start it again.

Until 2026-11 it printed the reason and then never exited: the state database's reading connection had been
opened (its thread started) before the failure and was never closed, so the process waited for that thread
forever, a daemon neither running nor restarted (nemesis seed 46109: a node started on its full state disk).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemon import daemon_process, run_cli, wait_events, write_config
from tests.support.mounts import Mounts, mounts

EXIT_WITHIN = 60  # seconds: far more than a start takes; a daemon that hangs instead fails the test


@pytest.fixture
def mnt(tmp_path: Path) -> Iterator[Mounts]:
    with mounts(tmp_path) as m:
        yield m


def test_a_daemon_whose_state_database_is_damaged_says_so_and_exits(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "polpo.db").write_bytes(b"not a database, " * 512)
    r = run_cli("daemon", "--config", str(config), timeout=EXIT_WITHIN)
    assert r.returncode == 1
    assert f"the state database {tmp_path / 'state' / 'polpo.db'} is not a SQLite database" in r.stderr
    assert "move it aside" in r.stderr


def test_a_daemon_started_on_a_full_state_disk_exits_saying_so_and_starts_once_there_is_room(
        tmp_path: Path, mnt: Mounts) -> None:
    config = write_config(tmp_path)
    state = tmp_path / "state"
    mnt.tmpfs(state, size_kb=2048, inodes=64)
    with daemon_process(config) as proc:  # a state made by an earlier life, stopped cleanly
        wait_events(state, lambda evs: any(e["event"] == "orchestrator:started" for e in evs))
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=EXIT_WITHIN)
    filler = mnt.fill(state)  # every block and inode: SQLite cannot make the database's WAL files
    r = run_cli("daemon", "--config", str(config), timeout=EXIT_WITHIN)
    assert r.returncode == 1
    assert "its file system is full: free space there" in r.stderr, r.stderr
    mnt.free(filler)
    with daemon_process(config):
        evs = wait_events(state, lambda evs: sum(e["event"] == "orchestrator:started" for e in evs) == 2,
                          timeout=EXIT_WITHIN)
    assert [e["event"] for e in evs].count("orchestrator:started") == 2
