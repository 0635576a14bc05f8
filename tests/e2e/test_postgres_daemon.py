"""A real daemon on the PostgreSQL store: a mission runs to completion and the CLI reads it from the database;
killed mid-mission, the next daemon resumes it; a wrong password stops the start without being shown."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import anyio
import asyncpg
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

pytestmark = pytest.mark.slow


def pg_config(root: Path, url: str, **kw: object) -> Path:
    return write_config(root, extra=f'[store]\nurl = "{url}"\npool_size = 3\n', **kw)  # type: ignore[arg-type]


async def _fetch(url: str, sql: str) -> list[tuple[object, ...]]:
    conn = await asyncpg.connect(url)
    try:
        return [tuple(r) for r in await conn.fetch(sql)]
    finally:
        await conn.close()


def fetch(url: str, sql: str) -> list[tuple[object, ...]]:
    return anyio.run(_fetch, url, sql)


def test_a_mission_runs_to_completion_on_postgresql_and_the_cli_reads_it(tmp_path: Path, postgres_url: str) -> None:
    config = pg_config(tmp_path, postgres_url)
    state = tmp_path / "state"
    (tmp_path / "missions" / "pg.json").write_text(mission_json(
        shell_task("A", "echo a > a.txt", expectations=[{"type": "file_exists", "path": "a.txt"}]),
        shell_task("B", "cat a.txt > b.txt", dependsOn=["A"],
                   expectations=[{"type": "test", "command": "grep -q a b.txt"}]),
        name="pg mission"))
    with daemon_process(config):
        evs = wait_events(state, lambda evs: any(e["event"] == "mission:completed" for e in evs))
        status = run_cli("status", "--json", "--config", str(config))
        show = run_cli("show", "pg:2", "--config", str(config))
    assert next(e for e in evs if e["event"] == "mission:completed")["data"]["outcome"] == "completed"
    assert not (state / "polpo.db").exists()  # nothing went to SQLite
    assert status.returncode == 0, status.stderr
    [m] = json.loads(status.stdout)["missions"]
    assert (m["id"], m["status"], m["done"], m["total"]) == ("pg", "completed", 2, 2)
    assert [t["status"] for t in m["tasks"]] == ["done", "done"]
    assert show.returncode == 0, show.stderr
    assert "task pg:2: B" in show.stdout and "[pass] test" in show.stdout
    logged = read_events(state)
    stored = fetch(postgres_url, "SELECT seq, event FROM events ORDER BY seq")
    assert [(e["seq"], e["event"]) for e in logged] == stored  # the log is the table, in order
    assert fetch(postgres_url, "SELECT id, status FROM tasks ORDER BY idx") == [("pg:1", "done"), ("pg:2", "done")]


def test_a_killed_daemon_on_postgresql_resumes_the_mission_on_restart(tmp_path: Path, postgres_url: str) -> None:
    config = pg_config(tmp_path, postgres_url, max_concurrency=2)
    state = tmp_path / "state"
    ws = state / "workspaces" / "crash"
    record = 'echo "$POLPO_TASK_TITLE" >> runs.log; '
    (tmp_path / "missions" / "crash.json").write_text(mission_json(
        shell_task("A", record + "echo a > a.txt"),
        shell_task("B", record + "echo $$ > b.pid; while [ ! -f go ]; do sleep 0.05; done; echo b > b.txt",
                   dependsOn=["A"], expectations=[{"type": "file_exists", "path": "b.txt"}]),
        shell_task("C", record + "cat b.txt > c.txt", dependsOn=["B"])))
    with daemon_process(config) as proc:
        # B's start is committed (agent:spawned comes with its in_progress), not only its process started
        wait_events(state, lambda evs: (ws / "b.pid").exists() and any(
            e["event"] == "agent:spawned" and e.get("taskId") == "crash:2" for e in evs))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    (ws / "go").write_text("")
    with daemon_process(config):
        evs = wait_events(state, lambda evs: any(e["event"] == "mission:completed" for e in evs))
    assert next(e for e in evs if e["event"] == "mission:completed")["data"]["outcome"] == "completed"
    assert (ws / "runs.log").read_text().split() == ["A", "B", "B", "C"]  # A not re-run; B interrupted, re-run
    recovered = [(e["taskId"], e["data"]["previousStatus"]) for e in evs if e["event"] == "task:recovered"]
    assert recovered == [("crash:2", "in_progress")]
    assert fetch(postgres_url, "SELECT status FROM attempts WHERE task_id = 'crash:2' ORDER BY number") == [
        ("interrupted",), ("finished",)]
    seqs = [e["seq"] for e in read_events(state)]
    assert seqs == sorted(seqs) and len(seqs) == len(set(seqs))
    assert seqs == [s for (s,) in fetch(postgres_url, "SELECT seq FROM events ORDER BY seq")]


def test_a_wrong_password_stops_the_daemon_without_printing_it(
    tmp_path: Path, postgres_url: str, postgres_cluster: PgCluster
) -> None:
    url = postgres_cluster.password_role("polpo_pw", "right-Pa55word", postgres_url.rsplit("/", 1)[1])
    config = write_config(tmp_path, extra=f'[store]\nurl = "{url}"\npassword_env = "POLPO_PG_PW"\n')
    with daemon_process(config, env={"POLPO_PG_PW": "wr0ng-Pa55word-xyz"}) as proc:
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "password authentication failed" in err and "Traceback" not in err
    assert "wr0ng-Pa55word-xyz" not in out + err
    status = run_cli("status", "--config", str(config), env={"POLPO_PG_PW": "wr0ng-Pa55word-xyz"})
    assert status.returncode == 1 and "password authentication failed" in status.stderr
    assert "wr0ng-Pa55word-xyz" not in status.stdout + status.stderr


def test_a_cli_command_reaches_a_daemon_on_postgresql_and_is_answered(tmp_path: Path, postgres_url: str) -> None:
    config = pg_config(tmp_path, postgres_url)
    state = tmp_path / "state"
    (tmp_path / "missions" / "long.json").write_text(mission_json(
        shell_task("wait", "while [ ! -f go ]; do sleep 0.05; done")))
    with daemon_process(config):
        wait_events(state, lambda evs: any(e["event"] == "agent:spawned" for e in evs))
        cancel = run_cli("cancel", "long", "--config", str(config))
        evs = wait_events(state, lambda evs: any(e["event"] == "mission:cancelled" for e in evs))
    assert cancel.returncode == 0, cancel.stderr
    assert cancel.stdout.strip() == "cancelling mission long"  # the daemon's answer, read back from the row
    assert fetch(postgres_url, "SELECT kind, target, status FROM commands") == [("cancel", "long", "done")]
    assert any(e["event"] == "mission:cancelled" and e["missionId"] == "long" for e in evs)
