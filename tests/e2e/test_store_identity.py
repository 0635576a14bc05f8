"""A real daemon and its store's identity: a database deleted under it stops it (and saves a copy); a restart
beside a log another or a lost store wrote is refused with the fix; ``--archive-log`` begins anew; a normal
restart and an upgrade from a position file without identity go on. A mission's side effect (a line appended
to a file outside its workspace) counts how many times it ran."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import (
    daemon_process,
    mission_json,
    read_events,
    run_cli,
    shell_task,
    wait_events,
    write_config,
)
from tests.support.postgres import PgCluster
from tests.support.procs import pid_in, wait_dead

pytestmark = pytest.mark.slow

DB_FILES = ("polpo.db", "polpo.db-wal", "polpo.db-shm")
Events = list[dict[str, Any]]


def setup(root: Path, extra: str = "") -> tuple[Path, Path, Path]:
    """A config, its state folder, and a mission whose two tasks each append a line to ``side.txt``."""
    config = write_config(root, extra=extra)
    side = root / "side.txt"
    (root / "missions" / "twice.json").write_text(mission_json(
        shell_task("A", f"echo A >> {side}"), shell_task("B", f"echo B >> {side}", dependsOn=["A"])))
    return config, root / "state", side


def count(name: str, n: int = 1) -> Callable[[Events], bool]:
    return lambda evs: sum(e["event"] == name for e in evs) >= n


def runs(side: Path) -> list[str]:
    return side.read_text().split() if side.exists() else []


def run_once(config: Path, state: Path, n: int = 1) -> None:
    """A daemon until the n-th mission:completed, then stopped as a service manager stops it."""
    with daemon_process(config):
        wait_events(state, count("mission:completed", n))


def read_log(path: Path) -> Events:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def store_id(db: Path) -> str:
    with closing(sqlite3.connect(db)) as con:
        return str(con.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()[0])


def test_a_store_deleted_under_a_running_daemon_stops_it_and_no_restart_runs_the_mission_again(
        tmp_path: Path) -> None:
    config, state, side = setup(tmp_path)
    slow = tmp_path / "slow.txt"  # a task still running when the database goes: it must be stopped
    (tmp_path / "missions" / "slow.json").write_text(mission_json(shell_task(
        "S", f"echo $$ > {tmp_path}/slow.pid; echo start >> {slow}; sleep 60; echo end >> {slow}")))
    with daemon_process(config) as proc:
        wait_events(state, count("mission:completed"))
        wait_events(state, lambda evs: slow.exists())
        agent = pid_in(tmp_path / "slow.pid")
        assert agent is not None
        gone = tmp_path / "deleted"  # a task deletes the database (once), then its result cannot be stored
        (tmp_path / "missions" / "rm.json").write_text(mission_json(
            shell_task("R", f"[ -f {gone} ] || {{ touch {gone}; rm -f " + " ".join(str(state / n) for n in DB_FILES)
                       + "; }"),
            *[shell_task(f"R{i}", "true", dependsOn=["R"]) for i in range(3)]))  # their start cannot be stored
        code = proc.wait(timeout=30)  # bounds the wait: a daemon that does not notice never exits
        err = proc.stderr.read() if proc.stderr else ""
    assert code == 1
    assert wait_dead(agent) and slow.read_text().split() == ["start"]  # its agent was stopped with it
    assert f"the store {state / 'polpo.db'} was deleted while the daemon ran" in err
    [rescued] = state.glob("polpo.db.rescued-*")
    assert f"saved what the database held as {rescued}" in err and "Traceback" not in err
    assert runs(side) == ["A", "B"]
    logged = read_events(state)

    refused = run_cli("daemon", "--config", str(config), timeout=60)  # a restart beside the lost store's log
    assert refused.returncode == 1
    assert f"the store {state / 'polpo.db'} is not the one {state / 'events.jsonl'} was written from" in refused.stderr
    assert "this store is" in refused.stderr and "holds no events" in refused.stderr
    assert "Restore the database" in refused.stderr and "polpo daemon --archive-log" in refused.stderr
    assert runs(side) == ["A", "B"] and read_events(state) == logged  # nothing admitted, run or logged

    rescued.replace(state / "polpo.db")  # what the message says to do
    with daemon_process(config):
        evs = wait_events(state, count("orchestrator:started", 2))
    assert runs(side) == ["A", "B"]  # it went on where it was: the finished mission did not run again
    assert [e["seq"] for e in evs] == list(range(1, len(evs) + 1))
    accepted = [e["missionId"] for e in read_events(state) if e["event"] == "mission:accepted"]
    assert sorted(accepted) == ["rm", "slow", "twice"]  # each once; interrupted tasks resume, as after a crash


def test_archive_log_begins_a_new_log_with_the_new_store_and_runs_the_missions_again(tmp_path: Path) -> None:
    config, state, side = setup(tmp_path)
    run_once(config, state)
    old = read_events(state)
    for name in DB_FILES:
        (state / name).unlink(missing_ok=True)
    with daemon_process(config, args=("--archive-log",)):
        evs = wait_events(state, lambda evs: any(state.glob("events.jsonl.2*")) and count("mission:completed")(evs))
    [archived] = [p for p in state.glob("events.jsonl.*") if not p.name.endswith(".pos")]
    assert read_log(archived) == old  # the old log, whole, aside
    assert evs[0]["seq"] == 1 and evs[0]["event"] == "orchestrator:started"  # the new log: the new store's events
    assert (state / "events.jsonl.pos").read_text().split()[0] == store_id(state / "polpo.db")
    assert runs(side) == ["A", "B", "A", "B"]  # asked for: the missions folder's files were admitted again


def test_another_stores_database_is_refused(tmp_path: Path) -> None:
    config, state, side = setup(tmp_path / "one")
    other_config, other_state, other_side = setup(tmp_path / "two")
    run_once(config, state)
    run_once(other_config, other_state)
    shutil.copy(other_state / "polpo.db", state / "polpo.db")  # (stopped cleanly: no WAL beside either)
    logged = read_events(state)
    refused = run_cli("daemon", "--config", str(config), timeout=60)
    assert refused.returncode == 1
    assert (f"this store is {store_id(other_state / 'polpo.db')} and holds events up to" in refused.stderr
            and "the log was written from store" in refused.stderr)
    assert runs(side) == ["A", "B"] and runs(other_side) == ["A", "B"] and read_events(state) == logged


def test_a_normal_restart_goes_on_and_a_position_file_without_identity_is_adopted(tmp_path: Path) -> None:
    config, state, side = setup(tmp_path)
    run_once(config, state)
    pos = state / "events.jsonl.pos"
    ident = store_id(state / "polpo.db")
    assert pos.read_text().split()[0] == ident
    seq = pos.read_text().split()[1]
    pos.write_text(f"{seq}\n".ljust(21))  # as a polpo from before identities left it
    with daemon_process(config):
        wait_events(state, count("orchestrator:started", 2))
    assert pos.read_text().split()[0] == ident  # adopted
    with daemon_process(config):  # and an ordinary restart goes on
        wait_events(state, count("orchestrator:started", 3))
    assert runs(side) == ["A", "B"]
    assert sum(e["event"] == "mission:accepted" for e in read_events(state)) == 1


def test_a_postgresql_database_dropped_and_created_again_stops_the_daemon_and_is_refused_at_restart(
        tmp_path: Path, postgres_cluster: PgCluster) -> None:
    name = postgres_cluster.create_database("ident")
    url = postgres_cluster.url(name)
    try:
        config, state, side = setup(tmp_path, extra=f'[store]\nurl = "{url}"\npool_size = 3\n')
        with daemon_process(config) as proc:
            wait_events(state, count("mission:completed"))
            postgres_cluster.drop_database(name)
            postgres_cluster.psql(f'CREATE DATABASE "{name}" TEMPLATE template0')
            code = proc.wait(timeout=60)
            err = proc.stderr.read() if proc.stderr else ""
        # the leader's lost connection stops it first here (the identity check, every 5 s, is the net for a
        # drop that does not break the connections: tests/integration/test_store_identity.py)
        assert code == 1, err
        logged = read_events(state)
        refused = run_cli("daemon", "--config", str(config), timeout=60)
        assert refused.returncode == 1
        assert "is not the one" in refused.stderr and "--archive-log" in refused.stderr
        assert runs(side) == ["A", "B"] and read_events(state) == logged
    finally:
        postgres_cluster.drop_database(name)
