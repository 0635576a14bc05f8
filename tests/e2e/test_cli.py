"""The `polpo` command line, run as a user would (subprocesses)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.integration.test_intake import INVALID
from tests.support.daemon import (
    REPO,
    daemon_process,
    mission_json,
    polpo_cmd,
    run_cli,
    shell_task,
    wait_events,
    write_config,
)

pytestmark = pytest.mark.slow


def test_validate_reports_every_invalid_file_with_path_and_reason(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    files = []
    for name, text in INVALID.items():
        p = tmp_path / name
        p.write_text(text)
        files.append(str(p))
    for f in files:
        r = run_cli("validate", "--config", str(config), f)
        assert r.returncode == 1, f
        lines = r.stdout.strip().splitlines()
        assert lines and all(ln.startswith(f + ": $") for ln in lines), r.stdout
    r = run_cli("validate", "--config", str(config), str(tmp_path / "cycle.json"))
    assert "dependency cycle" in r.stdout
    r = run_cli("validate", "--config", str(config), str(tmp_path / "unknown-agent.json"))
    assert "$.tasks[0].assignTo" in r.stdout and "shell" in r.stdout


def test_validate_accepts_the_bundled_missions() -> None:
    missions = sorted(str(p) for p in (REPO / "missions").glob("*.json"))
    r = run_cli("validate", "--config", str(REPO / "config" / "polpo.toml"), *missions)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(": ok") == len(missions)


def test_schema_is_json_schema() -> None:
    r = run_cli("schema")
    assert r.returncode == 0
    schema = json.loads(r.stdout)
    assert "tasks" in schema["properties"]


def test_submit_status_show_tail_retry(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    state = tmp_path / "state"
    src = tmp_path / "job.json"
    src.write_text(mission_json(
        shell_task("make", "echo hi > out.txt", expectations=[{"type": "file_exists", "path": "out.txt"}]),
        shell_task("flaky", "test -f go || exit 4", maxRetries=0),
    ))
    with daemon_process(config):
        r = run_cli("submit", "--config", str(config), str(src))
        assert r.returncode == 0, r.stderr
        assert (tmp_path / "missions" / "job.json").read_bytes() == src.read_bytes()
        wait_events(state, lambda evs: any(e["event"] == "mission:completed" for e in evs))

        st = json.loads(run_cli("status", "--json", "--config", str(config)).stdout)
        assert st["daemon"]["running"] is True
        m = next(x for x in st["missions"] if x["id"] == "job")
        assert m["status"] == "failed" and [t["status"] for t in m["tasks"]] == ["done", "failed"]

        shown = json.loads(run_cli("show", "job:1", "--json", "--config", str(config)).stdout)
        assert shown["attempts"][0]["assessments"][0]["checks"][0]["passed"] == 1
        text = run_cli("show", "job:2", "--config", str(config)).stdout
        assert "exit 4" in text

        tail = run_cli("tail", "--json", "-n", "1000", "--event", "mission:*", "--config", str(config)).stdout
        names = [json.loads(x)["event"] for x in tail.splitlines()]
        assert names == ["mission:accepted", "mission:completed"]
        readable = run_cli("tail", "-n", "5", "--config", str(config)).stdout
        assert "mission:completed" in readable

        (state / "workspaces" / "job" / "go").write_text("")
        r = run_cli("retry", "job:2", "--config", str(config))
        assert r.returncode == 0 and "retrying job:2" in r.stdout, r.stdout + r.stderr
        wait_events(state, lambda evs: sum(e["event"] == "mission:completed" for e in evs) == 2)
        st = json.loads(run_cli("status", "--json", "--config", str(config)).stdout)
        assert next(x for x in st["missions"] if x["id"] == "job")["status"] == "completed"
        r = run_cli("retry", "job:1", "--config", str(config))
        assert r.returncode == 1 and "only failed tasks" in r.stderr


def test_cli_errors_say_what_to_do(tmp_path: Path) -> None:
    r = run_cli("status", "--config", str(tmp_path / "nope.toml"))
    assert r.returncode == 1 and "config file not found" in r.stderr
    config = write_config(tmp_path)
    r = run_cli("status", "--config", str(config))
    assert r.returncode == 1 and "start the daemon" in r.stderr


def test_help_lists_every_command_in_one_aligned_block() -> None:
    r = run_cli("--help")
    assert r.returncode == 0
    block = [ln for ln in r.stdout.splitlines() if ln.strip().split(":")[0] in
             ("Start", "Watch", "Inspect", "Quality", "Act")]
    assert len(block) == 5
    assert len({len(ln) - len(ln.lstrip()) for ln in block}) == 1, block  # same indent
    assert len({ln.index(":") + len(ln[ln.index(":") + 1:]) - len(ln[ln.index(":") + 1:].lstrip())
                for ln in block}) == 1, block  # the commands start in one column
    for command in ("daemon", "validate", "submit", "status", "show", "tail", "retry", "cancel", "approve",
                    "schema", "metrics"):
        assert f"  {command} " in r.stdout


def test_the_daemon_and_tail_follow_a_rotated_log(tmp_path: Path) -> None:
    """logrotate moves events.jsonl away and sends SIGHUP; `polpo tail -f` goes on with the new file."""
    import signal
    import subprocess
    import time

    config = write_config(tmp_path)
    state = tmp_path / "state"
    log = state / "events.jsonl"
    with daemon_process(config) as proc:
        wait_events(state, lambda evs: any(e["event"] == "orchestrator:started" for e in evs))
        tail = subprocess.Popen(polpo_cmd("tail", "-f", "-n", "0", "--json", "--config", str(config)),
                                stdout=subprocess.PIPE, text=True)
        try:
            time.sleep(0.5)  # let tail reach the end of the file before the rotation (a harness wait)
            (tmp_path / "missions" / "one.json").write_text(mission_json(shell_task("a", "true")))
            wait_events(state, lambda evs: any(e["event"] == "mission:completed" for e in evs))
            os.rename(log, state / "events.jsonl.1")
            proc.send_signal(signal.SIGHUP)
            (tmp_path / "missions" / "two.json").write_text(mission_json(shell_task("b", "true")))
            # the reopened log (the same path) gets the second mission's events
            wait_events(state, lambda evs: any(e["event"] == "mission:completed" for e in evs))
            time.sleep(0.5)  # tail polls every 0.1 s
        finally:
            tail.terminate()
            out, _ = tail.communicate(timeout=10)
    old = [json.loads(x) for x in (state / "events.jsonl.1").read_text().splitlines()]
    new = [json.loads(x) for x in log.read_text().splitlines()]
    assert {e["missionId"] for e in old if e["event"] == "mission:completed"} == {"one"}
    assert {e["missionId"] for e in new if e["event"] == "mission:completed"} == {"two"}
    assert not {e["seq"] for e in old} & {e["seq"] for e in new}  # nothing written twice
    followed = [json.loads(x) for x in out.splitlines()]
    assert [e["missionId"] for e in followed if e["event"] == "mission:completed"] == ["one", "two"]
    with daemon_process(config):  # a restart appends only what the new file lacks
        wait_events(state, lambda evs: sum(e["event"] == "orchestrator:started" for e in evs) >= 1)
    again = [json.loads(x)["seq"] for x in log.read_text().splitlines()]
    assert again[:len(new)] == [e["seq"] for e in new]  # the history is not copied into the new file
    assert again == list(range(again[0], again[0] + len(again)))  # the restart's events follow, once each


def test_a_second_daemon_on_the_same_state_folder_is_refused_with_the_first_ones_pid(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    with daemon_process(config) as first:
        wait_events(tmp_path / "state", lambda evs: any(e["event"] == "orchestrator:started" for e in evs))
        r = run_cli("daemon", "--config", str(config))
        assert r.returncode == 1
        assert f"another polpo daemon (pid {first.pid}) is using {tmp_path / 'state'}" in r.stderr
        assert "watching" not in r.stderr
        assert first.poll() is None


@pytest.mark.parametrize("exists", [False, True])
def test_a_missions_folder_the_daemon_had_to_create_is_warned_about(tmp_path: Path, exists: bool) -> None:
    """A typo'd missions_dir is created (so a later folder works) but said out loud, before "watching"."""
    config = write_config(tmp_path)
    if not exists:
        (tmp_path / "missions").rmdir()
    with daemon_process(config) as proc:
        wait_events(tmp_path / "state", lambda evs: any(e["event"] == "orchestrator:started" for e in evs))
        assert proc.stderr is not None
        lines: list[str] = []
        while not any(x.startswith("polpo: watching") for x in lines) and len(lines) < 20:  # events' lines between
            lines.append(proc.stderr.readline())
    warned = [x for x in lines if "did not exist and was created" in x]
    assert bool(warned) is not exists, lines
    if warned:
        assert str(tmp_path / "missions") in warned[0] and "[daemon] missions_dir" in warned[0]
        assert lines.index(warned[0]) < next(i for i, x in enumerate(lines) if x.startswith("polpo: watching"))
