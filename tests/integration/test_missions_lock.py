"""One daemon per missions folder: a second daemon of another store on the same folder is refused, naming the
daemon that holds it, and runs nothing; daemons of one store (a cluster's nodes) share the folder; a holder that
is gone leaves no lock behind."""

from __future__ import annotations

import fcntl
import json
import threading
import time
from pathlib import Path

import pytest

from polpo import missions_lock
from tests.support.daemon import daemon_process, mission_json, run_cli, shell_task, wait_events, write_config


def test_a_second_daemon_on_the_same_folder_is_refused_with_the_holder(tmp_path: Path) -> None:
    first = write_config(tmp_path / "a")
    second = write_config(tmp_path / "b")
    shared = tmp_path / "a" / "missions"
    text = second.read_text().replace('missions_dir = "../missions"', f'missions_dir = "{shared}"')
    second.write_text(text)
    with daemon_process(first) as proc:
        wait_events(tmp_path / "a" / "state", lambda evs: any(e["event"] == "orchestrator:started" for e in evs))
        (shared / "m.json").write_text(mission_json(shell_task("t", "echo once >> ran.txt"), name="m"))
        wait_events(tmp_path / "a" / "state", lambda evs: any(e["event"] == "mission:completed" for e in evs))
        out = run_cli("daemon", "--config", str(second), timeout=30)
        assert out.returncode == 1
        assert f"the missions folder {shared} is watched by another polpo daemon (pid {proc.pid}" in out.stderr
        assert f"state folder {tmp_path / 'a' / 'state'}" in out.stderr and "[daemon] missions_dir" in out.stderr
        assert not (tmp_path / "b" / "state" / "workspaces").exists()  # it ran nothing
    held = json.loads((shared / missions_lock.LOCK_NAME).read_text())
    assert held["pid"] == proc.pid and held["state_dir"] == str(tmp_path / "a" / "state")


def test_daemons_of_one_store_share_the_folder_and_another_store_is_refused(tmp_path: Path) -> None:
    node = missions_lock.describe("store-1", tmp_path / "s1", "n1")
    a = missions_lock.take(tmp_path, node)
    b = missions_lock.take(tmp_path, {**node, "node": "n2"})  # the cluster's second node
    assert a is not None and b is not None
    with pytest.raises(missions_lock.FolderInUse, match="node n1, state folder"):
        missions_lock.take(tmp_path, missions_lock.describe("store-2", tmp_path / "s2", None))
    missions_lock.release(a)
    missions_lock.release(b)
    c = missions_lock.take(tmp_path, missions_lock.describe("store-2", tmp_path / "s2", None))  # nobody holds it
    assert c is not None and json.loads((tmp_path / missions_lock.LOCK_NAME).read_text())["store"] == "store-2"
    missions_lock.release(c)


def test_a_node_that_checks_while_a_peer_writes_its_name_shares_the_folder(tmp_path: Path) -> None:
    """The peer that took the folder a moment ago holds it exclusively while the file is still empty (it writes
    its name next): the node of the same store asks again rather than calling the holder another daemon (a
    cluster test saw node a refused by "another polpo daemon (unknown)", its own peer b)."""
    node = missions_lock.describe("store-1", tmp_path / "s1", "b")
    peer = open(tmp_path / missions_lock.LOCK_NAME, "a+")  # noqa: SIM115 - closed below
    fcntl.flock(peer, fcntl.LOCK_EX)  # taken, the name not written yet

    def write_name() -> None:
        time.sleep(0.1)
        peer.write(json.dumps(node))
        peer.flush()
        fcntl.flock(peer, fcntl.LOCK_SH)

    writer = threading.Thread(target=write_name)
    writer.start()
    try:
        mine = missions_lock.take(tmp_path, {**node, "node": "a"})
        assert mine is not None  # shared with its peer, not refused
        missions_lock.release(mine)
    finally:
        writer.join(10)
        peer.close()
