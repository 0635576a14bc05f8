"""A daemon on SQLite keeps a guard too (issue 28): its agents die with it, whatever was killed first, and a node
that cannot keep a guard stops its agents and exits with the reason. Real daemon processes, real signals."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.e2e.test_cluster_guard_loss import alive, replaced, within
from tests.support.daemon import daemon_process, load, mission_json, shell_task, submit, write_config
from tests.support.procs import guards_of, pid_in

pytestmark = pytest.mark.slow


def test_the_agents_of_a_daemon_on_sqlite_die_with_it_after_its_guard_was_replaced(tmp_path: Path) -> None:
    cfg = write_config(tmp_path)
    with daemon_process(cfg) as proc:
        submit_long(tmp_path)
        agent = wait_agent(tmp_path)
        guard = guards_of(proc.pid)[0]
        os.kill(guard, signal.SIGKILL)
        replaced(proc.pid, guard)
        proc.kill()  # kill -9 of the daemon: its new guard kills the agent
        proc.wait()
        assert within(10, lambda: not alive(agent)), "the agent outlived its daemon"


def test_a_daemon_that_cannot_keep_a_guard_stops_its_agents_and_exits_with_the_reason(tmp_path: Path) -> None:
    cfg = write_config(tmp_path)
    with daemon_process(cfg) as proc:
        submit_long(tmp_path)
        agent = wait_agent(tmp_path)
        for _ in range(3):  # each one lost is replaced…
            guard = guards_of(proc.pid)[0]
            os.kill(guard, signal.SIGKILL)
            replaced(proc.pid, guard)
        os.kill(guards_of(proc.pid)[0], signal.SIGKILL)  # …up to three within a minute: then the node gives up
        assert proc.wait(timeout=30) == 1
        _, err = proc.communicate()
        assert err.strip().splitlines()[-1].startswith("polpo: stopped: this node cannot keep a guard"), err
        assert not alive(agent)


def submit_long(root: Path) -> None:
    submit(load(root / "config" / "polpo.toml"), "long.json", mission_json(
        shell_task("Long", f"echo $$ > {root / 'agent.pid'}; exec sleep 60"), name="long"))


def wait_agent(root: Path) -> int:
    assert within(30, lambda: pid_in(root / "agent.pid") is not None), "the agent never started"
    pid = pid_in(root / "agent.pid")
    assert pid is not None
    return pid
