"""A scheduled mission through the real ``polpo daemon`` process and SQLite: kill -9 after a firing, start it
again; no firing runs twice and none is lost; ``polpo schedules`` lists it and pauses it through the inbox."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from tests.support.daemon import daemon_process, mission_json, run_cli, shell_task, wait_events, write_config


def _fired(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in evs if e["event"] == "schedule:triggered"]


def test_kill_9_after_a_firing_then_restart_fires_each_instant_once(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    state = tmp_path / "state"
    # every 2 s; every firing missed while the daemon is down is due at the restart (catchUp "all"): one that
    # was fired before the kill would be fired again if its cursor had not been stored with its run
    (tmp_path / "missions" / "report.json").write_text(mission_json(
        shell_task("write", "echo ok > out.txt"), name="report", schedule="PT2S", catchUp="all"))
    with daemon_process(config) as proc:
        wait_events(state, lambda evs: len(_fired(evs)) >= 1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    before = len(_fired(wait_events(state, lambda evs: True)))
    with daemon_process(config):
        evs = wait_events(state, lambda evs: len(_fired(evs)) >= before + 2
                          and any(e["event"] == "mission:completed" and e["missionId"] == _fired(evs)[-1]["missionId"]
                                  for e in evs))
        fired = _fired(evs)
        instants = [e["data"]["scheduledFor"] for e in fired]
        runs = [e["missionId"] for e in fired]
        assert len(set(instants)) == len(instants), instants  # no instant fired twice across the kill
        listed = run_cli("schedules", "--json", "--config", str(config))
        assert listed.returncode == 0, listed.stderr
        (row,) = json.loads(listed.stdout)["schedules"]
        assert (row["id"], row["status"], row["expression"]) == ("report", "active", "PT2S")
        assert row["nextRunAt"] is not None and row["lastRun"] is not None
        paused = run_cli("schedules", "pause", "report", "--by", "ada", "--config", str(config))
        assert paused.returncode == 0 and "paused schedule report" in paused.stdout, paused.stderr
        changed = wait_events(state, lambda evs: any(e["event"] == "schedule:changed" for e in evs))
        assert [e["data"] for e in changed if e["event"] == "schedule:changed"] == [
            {"scheduleId": "report", "action": "paused", "by": "ada"}]  # who paused it, from --by
    assert runs == ["report", *[f"report#{n}" for n in range(2, len(runs) + 1)]]  # each firing a new run
    accepted = {e["missionId"] for e in evs if e["event"] == "mission:accepted"}
    assert set(runs) <= accepted  # every firing started its run (none lost between the two)
    listed = run_cli("schedules", "--config", str(tmp_path / "config" / "polpo.toml"))
    assert "report" in listed.stdout and "paused" in listed.stdout
