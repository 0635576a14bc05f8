"""kill -9 a real daemon around a metric's baseline: killed after the baseline was stored (the agent running), the
restarted daemon compares with the stored value and never measures again on the workspace the agent changed;
killed while the baseline was being measured (the agent not started), the orphaned measurement is ended and the
baseline measured again before the agent starts."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import daemon_process, mission_json, run_cli, shell_task, wait_events, write_config
from tests.support.procs import pid_in, wait_dead

pytestmark = pytest.mark.slow

LOGGED = 'echo "$POLPO_METRIC_PHASE" >> phases.log; cat cov.txt'


def _completed(evs: list[dict[str, Any]]) -> bool:
    return any(e["event"] == "mission:completed" for e in evs)


def _kill(proc: Any) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def _mission(tmp_path: Path, name: str, script: str, measure: str, **fields: Any) -> tuple[Path, Path, Path]:
    """A mission ``name`` whose first task leaves coverage at 80 and whose second runs ``script`` with a
    coverage metric measured by ``measure`` (baseline before); its config, state folder and workspace."""
    config = write_config(tmp_path)
    metric = {"type": "metric", "name": "coverage", "command": measure, "baseline": "before"}
    (tmp_path / "missions" / f"{name}.json").write_text(mission_json(
        shell_task("write", "echo 80 > cov.txt"),
        shell_task("second", script, dependsOn=["write"], expectations=[metric], **fields), name=name))
    return config, tmp_path / "state", tmp_path / "state" / "workspaces" / name


def test_kill_9_after_the_baseline_reuses_it_and_never_measures_the_changed_workspace(tmp_path: Path) -> None:
    # the first run lowers coverage to 50, then hangs (it is running when the daemon is killed); the run after
    # the restart leaves 70: worse than the 80 before the task, better than the 50 a re-measure would find
    agent = ("if [ -f agent.pid ]; then echo 70 > cov.txt; else echo 50 > cov.txt; echo $$ > agent.pid; "
             "while true; do sleep 0.05; done; fi")
    config, state, ws = _mission(tmp_path, "crash", agent, LOGGED, maxRetries=0, maxFixAttempts=0)
    with daemon_process(config) as proc:
        wait_events(state, lambda evs: pid_in(ws / "agent.pid") is not None)
        orphan = pid_in(ws / "agent.pid")
        assert orphan is not None
        _kill(proc)
    assert (ws / "cov.txt").read_text().strip() == "50"  # the workspace the agent changed
    assert (ws / "phases.log").read_text().split() == ["before"]
    with daemon_process(config):
        evs = wait_events(state, _completed)
    assert wait_dead(orphan)
    assert (ws / "phases.log").read_text().split() == ["before", "after"]  # not measured again
    baselines = [e for e in evs if e["event"] == "assessment:check:baseline"]
    assert [(e["taskId"], e["data"]["value"]) for e in baselines] == [("crash:2", 80.0)]
    [check] = [e["data"] for e in evs if e["event"] == "assessment:check:complete"]
    assert not check["passed"] and (check["metric"]["value"], check["metric"]["baseline"]) == (70.0, 80.0)
    shown = run_cli("show", "crash:2", "--config", str(config))
    assert shown.returncode == 0, shown.stderr
    assert "metric #1 coverage: 80 before the task (its baseline, measured before attempt 1)" in shown.stdout
    assert "[FAIL] metric coverage: coverage = 70: worse than 80 before the task (higher is better)" in shown.stdout


def test_kill_9_while_measuring_ends_the_orphan_and_measures_again_before_the_agent(tmp_path: Path) -> None:
    # the measurement before the task hangs until the file "go" exists (the daemon is killed meanwhile)
    measure = ('echo "$POLPO_METRIC_PHASE" >> phases.log; if [ "$POLPO_METRIC_PHASE" = before ]; then '
               'echo $$ > measure.$$.pid; while [ ! -f go ]; do sleep 0.05; done; fi; cat cov.txt')
    config, state, ws = _mission(tmp_path, "slow", "echo ran >> agent.log; echo 90 > cov.txt", measure)
    with daemon_process(config) as proc:
        wait_events(state, lambda evs: [pid_in(p) for p in ws.glob("measure.*.pid")] not in ([], [None]))
        [pid_file] = list(ws.glob("measure.*.pid"))
        orphan = pid_in(pid_file)
        assert orphan is not None
        _kill(proc)
    # the daemon's guard ends the measurement with it (a SQLite daemon has one since issue 28; before, the next
    # start's recovery did); no agent ran
    assert wait_dead(orphan) and not (ws / "agent.log").exists()
    with daemon_process(config):
        wait_events(state, lambda evs: len(list(ws.glob("measure.*.pid"))) == 2)  # measured again
        assert wait_dead(orphan)  # after the old measurement was ended
        (ws / "go").write_text("")
        evs = wait_events(state, _completed)
    assert (ws / "agent.log").read_text().split() == ["ran"]
    assert (ws / "phases.log").read_text().split() == ["before", "before", "after"]
    assert [e["data"]["value"] for e in evs if e["event"] == "assessment:check:baseline"] == [80.0]
    assert next(e for e in evs if e["event"] == "mission:completed")["data"]["outcome"] == "completed"
