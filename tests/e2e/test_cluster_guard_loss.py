"""A guard that dies is replaced at once (issue 28, break 1): real daemons on a real PostgreSQL, lease 2 s.

Before, ``kill -9`` of a node's guard left the daemon unguarded: a later ``kill -9`` of the daemon, or a pause of
it past its lease, left its agents running as orphans while another node ran their tasks too. Now the daemon
notices a guard's end (or its stop) at once and starts a new guard that holds the same process groups; and it keeps
two, so a guard killed while the daemon is paused leaves the other to kill the agents. Whatever is killed or paused
first, the agents end within the guard's bound."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator

import pytest

from tests.support.cluster import Cluster, cluster_on, orphans, ticking
from tests.support.postgres import PgCluster
from tests.support.procs import guards_of, is_dead

pytestmark = pytest.mark.slow

LEASE = 2.0


@pytest.fixture
def cluster(postgres_cluster: PgCluster) -> Iterator[Cluster]:
    with cluster_on(postgres_cluster, "guardloss") as (c, _, _):
        try:
            yield c
        finally:
            for node in c.nodes.values():  # a node left paused by a failed test must not hang the stop
                if node.proc is not None:
                    os.kill(node.proc.pid, signal.SIGCONT)


def alive(pid: int) -> bool:
    return not is_dead(pid)


def within(seconds: float, cond: object) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(cond())  # type: ignore[operator]


def running_agents(c: Cluster, n: int) -> set[int]:
    """Start node g with ``n`` long agents and wait until they all run; their pids (by the agents' own log)."""
    c.add("g", concurrency=n, lease=LEASE)
    c.start("g")
    tasks = [{"title": f"G{i}", "assignTo": "shell", "description": ticking(c.root, 60.0, f"echo {i} > g{i}.txt"),
              "expectations": [{"type": "file_exists", "path": f"g{i}.txt"}]} for i in range(n)]
    (c.missions / "guarded.json").write_text(json.dumps(
        {"name": "guarded", "workspace": str(c.shared / "guarded"), "tasks": tasks}))
    assert within(60, lambda: len({r[3] for r in c.runs() if r[0] == "start"}) == n)
    return {int(r[3]) for r in c.runs() if r[0] == "start"}


def replaced(daemon: int, old: int) -> int:
    """The new guard's pid, once the daemon has started one in place of ``old`` (it keeps a pair)."""
    assert within(5, lambda: old not in (now := guards_of(daemon)) and len(now) == 2), "no new guard was started"
    [new] = [g for g in guards_of(daemon) if g != old][-1:]
    return new


def lose_guard(c: Cluster, sig: int) -> int:
    """Send ``sig`` to one of node g's guards; the pid of the guard its daemon starts in its place."""
    node = c.nodes["g"]
    assert node.proc is not None
    guards = guards_of(node.proc.pid)
    assert len(guards) == 2, guards
    os.kill(guards[0], sig)
    return replaced(node.proc.pid, guards[0])


def test_a_killed_or_stopped_guard_is_replaced_and_the_agents_die_with_their_daemon(cluster: Cluster) -> None:
    c = cluster
    pids = running_agents(c, 2)
    lose_guard(c, signal.SIGSTOP)  # a stopped guard kills nothing: the daemon ends it and starts another
    lose_guard(c, signal.SIGKILL)
    assert all(alive(p) for p in pids)  # the agents go on: only the guard changed
    c.kill("g")  # kill -9 of the daemon: its (new) guard kills the agents
    assert within(10, lambda: not any(alive(p) for p in pids)), "agents outlived their daemon"
    assert orphans(c.root) == []


def test_a_daemon_paused_then_one_of_its_guards_killed_still_has_its_agents_killed(cluster: Cluster) -> None:
    """Nemesis seed 6099: a paused daemon cannot replace a guard killed meanwhile; the other one of its pair kills
    the agents (with a single guard they ran on past the take-over)."""
    c = cluster
    pids = running_agents(c, 2)
    node = c.nodes["g"]
    assert node.proc is not None
    guards = guards_of(node.proc.pid)
    c.pause("g")
    os.kill(guards[0], signal.SIGKILL)
    assert within(LEASE * 3, lambda: not any(alive(p) for p in pids)), "a paused daemon's agents went on"
    c.resume("g")
    assert c.exited("g", 30) == 1  # it finds itself stale by its own clock and leaves


def test_a_killed_guard_then_a_daemon_paused_past_its_lease_still_kills_the_agents(cluster: Cluster) -> None:
    c = cluster
    pids = running_agents(c, 2)
    lose_guard(c, signal.SIGKILL)
    c.pause("g")
    assert within(LEASE * 3, lambda: not any(alive(p) for p in pids)), "a paused daemon's agents went on"
    c.resume("g")
    assert c.exited("g", 30) == 1  # it finds itself stale by its own clock and leaves
