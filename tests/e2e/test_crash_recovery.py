"""kill -9 a real daemon mid-mission, start it again: the mission finishes, no finished task runs twice."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.support.daemon import (
    daemon_process,
    mission_json,
    read_events,
    shell_task,
    wait_events,
    write_config,
)
from tests.support.procs import guards_of, is_dead, pid_in, wait_dead

pytestmark = pytest.mark.slow


def _runs(ws: Path) -> list[str]:
    p = ws / "runs.log"
    return p.read_text().split() if p.exists() else []


def test_sigkill_then_restart_resumes_without_rerunning_finished_tasks(tmp_path: Path) -> None:
    config = write_config(tmp_path, max_concurrency=2)
    state = tmp_path / "state"
    ws = state / "workspaces" / "crash"
    # A, B quick; C blocks until a marker exists (it is running when we kill), D depends on C
    record = 'echo "$POLPO_TASK_TITLE" >> runs.log; '
    mission = mission_json(
        shell_task("A", record + "echo a > a.txt", expectations=[{"type": "file_exists", "path": "a.txt"}]),
        shell_task("B", record + "echo b > b.txt", dependsOn=["A"]),
        shell_task("C", record + "echo $$ > c.pid; while [ ! -f go ]; do sleep 0.05; done; echo c > c.txt",
                   dependsOn=["B"], expectations=[{"type": "file_exists", "path": "c.txt"}]),
        shell_task("D", record + "cat c.txt > d.txt", dependsOn=["C"]),
    )
    (tmp_path / "missions" / "crash.json").write_text(mission)
    with daemon_process(config) as proc:
        wait_events(state, lambda evs: any(e["event"] == "agent:spawned" and e.get("taskId") == "crash:3"
                                           for e in evs))
        wait_events(state, lambda evs: pid_in(ws / "c.pid") is not None)
        orphan = pid_in(ws / "c.pid")
        assert orphan is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    assert _runs(ws) == ["A", "B", "C"]
    os.kill(orphan, 0)  # the orphaned agent is still alive after the crash

    (ws / "go").write_text("")  # from now on, C can finish
    with daemon_process(config):
        evs = wait_events(state, lambda evs: any(e["event"] == "mission:completed" for e in evs))
    done = next(e for e in evs if e["event"] == "mission:completed")
    assert done["data"]["outcome"] == "completed"
    # A and B ran once; C was interrupted and ran again; D once
    assert _runs(ws) == ["A", "B", "C", "C", "D"]
    recovered = [e for e in evs if e["event"] == "task:recovered"]
    assert [(e["taskId"], e["data"]["previousStatus"]) for e in recovered] == [("crash:3", "in_progress")]
    assert is_dead(orphan)  # the orphan was killed at restart
    seqs = [e["seq"] for e in read_events(state)]
    assert seqs == sorted(seqs) and len(seqs) == len(set(seqs))
    # the interrupted attempt is on record
    import sqlite3

    con = sqlite3.connect(state / "polpo.db")
    statuses = [r[0] for r in con.execute("SELECT status FROM attempts WHERE task_id='crash:3' ORDER BY number")]
    assert statuses == ["interrupted", "finished"]


def test_sigterm_stops_cleanly_and_restart_resumes(tmp_path: Path) -> None:
    config = write_config(tmp_path, grace=0.5)
    state = tmp_path / "state"
    ws = state / "workspaces" / "term"
    (tmp_path / "missions" / "term.json").write_text(mission_json(
        shell_task("wait", "while [ ! -f go ]; do sleep 0.05; done; echo ok > done.txt",
                   expectations=[{"type": "file_exists", "path": "done.txt"}])))
    with daemon_process(config) as proc:
        wait_events(state, lambda evs: any(e["event"] == "agent:spawned" for e in evs))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    evs = read_events(state)
    assert evs[-1]["event"] == "orchestrator:shutdown"
    assert any(e["event"] == "task:transition" and e["data"]["to"] == "pending" for e in evs)
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "go").write_text("")
    with daemon_process(config):
        evs = wait_events(state, lambda evs: any(e["event"] == "mission:completed" for e in evs))
    assert next(e for e in evs if e["event"] == "mission:completed")["data"]["outcome"] == "completed"
    assert json.loads((state / "events.jsonl").read_text().splitlines()[0])["seq"] == 1


def test_a_child_that_left_its_group_with_setsid_is_gone_after_the_attempt(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    state = tmp_path / "state"
    escape = "setsid sleep 300 > /dev/null 2>&1 < /dev/null & echo $! > esc.pid"
    mission = mission_json(shell_task("exits", escape),
                           shell_task("times out", escape.replace("esc.pid", "esc2.pid") + "; sleep 60",
                                      maxDuration=1))
    (tmp_path / "missions" / "escape.json").write_text(mission)
    with daemon_process(config):
        wait_events(state, lambda evs: any(e["event"] == "mission:completed" for e in evs))
        ws = state / "workspaces" / "escape"
        first, second = int((ws / "esc.pid").read_text()), int((ws / "esc2.pid").read_text())
        assert wait_dead(first) and wait_dead(second)  # killed by the daemon, not by the end of the test


def test_a_check_left_running_by_kill_9_is_killed_before_the_checks_resume(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    state = tmp_path / "state"
    ws = state / "workspaces" / "check"
    check = "echo $$ > check.$$.pid; while [ ! -f go ]; do sleep 0.05; done"
    (tmp_path / "missions" / "check.json").write_text(mission_json(
        shell_task("t", "true", expectations=[{"type": "script", "command": check}])))
    with daemon_process(config) as proc:
        wait_events(state, lambda evs: [pid_in(p) for p in ws.glob("check.*.pid")] not in ([], [None]))
        [pid_file] = list(ws.glob("check.*.pid"))
        orphan = pid_in(pid_file)
        assert orphan is not None
        # the daemon and its guard die together (a machine-wide OOM kill): stopped first, so it cannot replace
        # its guard, then both killed; nothing is left to end the check but the next start's recovery
        os.kill(proc.pid, signal.SIGSTOP)
        guards = guards_of(proc.pid)
        assert guards
        for g in guards:
            os.kill(g, signal.SIGKILL)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    assert not is_dead(orphan)  # the check outlived the daemon
    with daemon_process(config):
        wait_events(state, lambda evs: len(list(ws.glob("check.*.pid"))) == 2)  # the check runs again
        assert wait_dead(orphan)  # and the old one was ended first
        (ws / "go").write_text("")
        evs = wait_events(state, lambda evs: any(e["event"] == "mission:completed" for e in evs))
    assert next(e for e in evs if e["event"] == "mission:completed")["data"]["outcome"] == "completed"
