"""``polpo submit`` against a running `polpo daemon` process: it prints the daemon's own verdict on the file it
wrote — the mission started, the schedule made, or why the daemon rejected bytes the local check accepted —
and says so when no daemon runs, or when the daemon (stopped with SIGSTOP) does not answer in time."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from polpo.cli.submit_wait import verdict_of
from tests.support.daemon import daemon_process, mission_json, run_cli, shell_task, wait_events, write_config


def started(state: Path) -> None:
    wait_events(state, lambda evs: any(e["event"] == "orchestrator:started" for e in evs))


def test_submit_prints_the_daemons_verdict(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    state = tmp_path / "state"
    slow = tmp_path / "job.json"
    slow.write_text(mission_json(shell_task("wait", "sleep 30"), shell_task("echo", "true"), name="job"))
    edited = tmp_path / "edited" / "job.json"
    edited.parent.mkdir()
    edited.write_text(mission_json(shell_task("wait", "sleep 31"), name="job"))
    nightly = tmp_path / "nightly.json"
    nightly.write_text(mission_json(shell_task("t", "true"), name="nightly", schedule="0 2 * * *", timezone="UTC"))
    with daemon_process(config) as proc:
        started(state)
        r = run_cli("submit", "--config", str(config), str(slow))
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[1] == "accepted: mission job (2 tasks)"
        shown = run_cli("show", "job", "--config", str(config))  # at once: the daemon has it
        assert shown.returncode == 0 and "job" in shown.stdout, shown.stderr

        r = run_cli("submit", "--config", str(config), str(edited))  # new bytes while job still runs
        assert r.returncode == 1
        assert "rejected by the daemon: still running" in r.stdout, r.stdout
        assert "the file stays in the missions folder" in r.stderr

        r = run_cli("submit", "--config", str(config), str(nightly))
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[1].startswith("scheduled: nightly (0 2 * * *, UTC); next run ")

        os.kill(proc.pid, signal.SIGSTOP)  # a daemon that does not answer: submit says so and returns
        try:
            late = tmp_path / "late.json"
            late.write_text(mission_json(shell_task("t", "true"), name="late"))
            r = run_cli("submit", "--wait", "1", "--config", str(config), str(late))
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        assert r.returncode == 0, r.stderr
        assert "the daemon has not taken it in after 1 s" in r.stdout
        wait_events(state, lambda evs: any(e["event"] == "mission:accepted" and e["missionId"] == "late"
                                           for e in evs))  # it is taken in once the daemon runs again
    r = run_cli("submit", "--config", str(config), str(tmp_path / "late.json"), "--name", "later.json")
    assert r.returncode == 0 and "no daemon is running here" in r.stdout


def test_the_verdict_is_the_event_about_this_file_and_these_bytes() -> None:
    def row(seq: int, event: str, data: str, mission: str | None = None) -> tuple[int, str, str, str | None,
                                                                                  str | None, str, str | None]:
        return (seq, "t", event, mission, None, data, None)
    rows = [row(1, "mission:accepted", '{"file": "/m/job.json", "hash": "old", "task_count": 1}', "job"),
            row(2, "task:transition", '{}'),
            row(3, "mission:accepted", '{"file": "/m/other.json", "hash": "new", "task_count": 1}', "other"),
            row(4, "mission:rejected", '{"file": "/m/job.json", "hash": "new", "reason": "invalid"}')]
    assert verdict_of(rows, "job.json", "new") == ("mission:rejected", None, {"file": "/m/job.json", "hash": "new",
                                                                             "reason": "invalid"})
    assert verdict_of(rows[:3], "job.json", "new") is None
    assert verdict_of([row(5, "schedule:created", '{"file": "/m/n.json", "scheduleId": "n"}')], "n.json", "x")
