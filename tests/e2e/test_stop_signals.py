"""Ctrl-C on a daemon with running agents: the first says what it waits for and for how long, the second stops
the agents at once and says which; the agents' process groups are gone when the daemon exits."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.support.daemon import daemon_process, mission_json, shell_task, wait_events, write_config

AGENT = """
[agents.shell]
type = "command"
command = ["bash", "-c", "{description}"]
timeout = 600
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_second_stop_signal_ends_the_grace_and_names_the_agents_it_stops(tmp_path: Path) -> None:
    # a grace and an agent timeout no test waits out: only the second signal ends the agent
    config = write_config(tmp_path, grace=600, agents=AGENT)
    pidfile = tmp_path / "agent.pid"
    (tmp_path / "missions" / "long.json").write_text(mission_json(
        shell_task("sleeper", f"echo $$ > {pidfile}; exec sleep 600"), name="long"))
    state = tmp_path / "state"
    with daemon_process(config) as proc:
        evs = wait_events(state, lambda evs: any(e["event"] == "agent:spawned" for e in evs) and pidfile.exists()
                          and pidfile.read_text().strip() != "")
        task_id = next(e["taskId"] for e in evs if e["event"] == "agent:spawned")
        agent = int(pidfile.read_text())
        proc.send_signal(signal.SIGINT)
        assert proc.stderr is not None
        first = ""
        for _ in range(50):  # bounded: the line comes among the first few
            first = proc.stderr.readline()
            if "stopping:" in first or not first:
                break
        assert f"stopping: waiting up to 600 s for 1 running agent(s) to finish ({task_id}); stop again" in first
        assert proc.poll() is None  # still waiting for the agent, within its 600 s grace
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        err = proc.stderr.read()
    assert f"stopping now: stopping 1 agent(s) ({task_id})" in err, err
    deadline = time.monotonic() + 10
    while _alive(agent) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(agent)
    assert any(e["event"] == "orchestrator:shutdown" for e in wait_events(state, lambda evs: True))
