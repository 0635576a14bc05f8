"""A passed gate is stored: after a kill -9 and a restart it is neither evaluated nor announced again."""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path

from tests.support.daemon import daemon_process, mission_json, shell_task, wait_events, write_config


def test_a_passed_gate_survives_kill_9(tmp_path: Path) -> None:
    cfg = write_config(tmp_path)
    state = tmp_path / "state"
    blocked = "if [ -f started ]; then echo ok > out.txt; else touch started; sleep 60; fi"
    (tmp_path / "missions" / "gated.json").write_text(mission_json(
        shell_task("build", "echo built > build.txt"), shell_task("deploy", blocked),
        qualityGates=[{"name": "built", "afterTasks": ["build"], "blocksTasks": ["deploy"],
                       "requireAllPassed": True}]))
    with daemon_process(cfg) as proc:
        wait_events(state, lambda es: any(e["event"] == "agent:spawned" and e.get("taskId") == "gated:2"
                                          for e in es))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    with daemon_process(cfg):
        evs = wait_events(state, lambda es: any(e["event"] == "mission:completed" for e in es))
    assert next(e for e in evs if e["event"] == "mission:completed")["data"]["outcome"] == "completed"
    assert [e["event"] for e in evs].count("quality:gate:passed") == 1
    con = sqlite3.connect(state / "polpo.db")
    assert con.execute("SELECT status FROM gates").fetchall() == [("passed",)]
