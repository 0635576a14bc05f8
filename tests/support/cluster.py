"""Several real `polpo daemon` processes on one PostgreSQL database, for the cluster tests and bench_cluster.

Each node has its own config and state folder and the same missions folder, shared workspace root and
database. The agent ``shell`` appends ``start``/``end`` lines (task, node, pid, [exit code,] time) to ``runs.log``
in the root with O_APPEND writes, so a test can check that no task ran twice at once and none ran again after it
passed. A task whose description is :func:`ticking` also appends a ``tick`` line every 0.1 s while it runs, so a
run that was killed (no ``end`` line) still shows, by its last tick, how long it went on (:func:`overlaps`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.postgres import PgCluster

AGENT = """
[agents.shell]
type = "command"
command = ["bash", "-c", "echo \\"start $POLPO_TASK_ID $POLPO_CLUSTER_NODE $$ $EPOCHREALTIME\\" >> {root}/runs.log; {{description}}; rc=$?; echo \\"end $POLPO_TASK_ID $POLPO_CLUSTER_NODE $$ $rc $EPOCHREALTIME\\" >> {root}/runs.log; exit $rc"]
timeout = 120
env = {{ POLPO_CLUSTER_NODE = "{node}" }}
"""


@dataclass
class Node:
    name: str
    config: Path
    state: Path
    proc: subprocess.Popen[bytes] | None = None
    kills: int = 0


@dataclass
class Cluster:
    root: Path
    url: str
    nodes: dict[str, Node] = field(default_factory=dict)

    @property
    def missions(self) -> Path:
        return self.root / "missions"

    @property
    def shared(self) -> Path:
        return self.root / "shared"

    def add(self, name: str, *, concurrency: int = 4, lease: float = 2.0, retries: int = 1, fixes: int = 2,
            url: str | None = None) -> Node:
        """A node's config and folders (``url``: its own way to the database, a proxy's; else the cluster's)."""
        (self.root / name).mkdir(parents=True, exist_ok=True)
        self.missions.mkdir(exist_ok=True)
        self.shared.mkdir(exist_ok=True)
        cfg = self.root / name / "polpo.toml"
        cfg.write_text(f"""
[daemon]
missions_dir = "{self.missions}"
state_dir = "{self.root / name / 'state'}"
max_concurrency = {concurrency}
shutdown_grace = 2
node = "{name}"

[store]
url = "{url or self.url}"
lease = {lease}

[security]
workspace_roots = ["{self.shared}"]

[defaults]
max_retries = {retries}
max_fix_attempts = {fixes}
agent_timeout = 120
check_timeout = 60
{AGENT.format(root=self.root, node=name)}
""")
        node = Node(name, cfg, self.root / name / "state")
        self.nodes[name] = node
        return node

    def start(self, name: str) -> None:
        node = self.nodes[name]
        with open(self.root / name / "daemon.out", "ab") as log:  # (the child has its own descriptor)
            node.proc = subprocess.Popen([sys.executable, "-m", "polpo", "daemon", "--config", str(node.config)],
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self, name: str) -> None:
        """kill -9 of the daemon alone (its guard then kills its agents)."""
        node = self.nodes[name]
        assert node.proc is not None
        os.kill(node.proc.pid, signal.SIGKILL)
        node.proc.wait()
        with open(self.root / "runs.log", "a") as f:  # in order with the agents' lines
            f.write(f"kill {name} - -\n")
        node.proc = None
        node.kills += 1

    def pause(self, name: str) -> None:
        """SIGSTOP of the daemon alone (its agents and its guard are other processes: they go on)."""
        proc = self.nodes[name].proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGSTOP)

    def resume(self, name: str) -> None:
        proc = self.nodes[name].proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGCONT)

    def exited(self, name: str, timeout: float) -> int:
        """Wait (bounded) for a daemon to exit by itself; its exit code. The node is then down (start it again)."""
        node = self.nodes[name]
        assert node.proc is not None
        rc = node.proc.wait(timeout=timeout)
        node.proc = None
        return rc

    def output(self, name: str) -> str:
        return (self.root / name / "daemon.out").read_text(errors="replace")

    def stop_all(self) -> None:
        for node in self.nodes.values():
            if node.proc is not None:
                node.proc.send_signal(signal.SIGTERM)
        for node in self.nodes.values():
            if node.proc is not None:
                try:
                    node.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(node.proc.pid, signal.SIGKILL)
                    node.proc.wait()
                node.proc = None

    def events(self, name: str) -> list[dict[str, Any]]:
        path = self.nodes[name].state / "events.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]

    def wait(self, name: str, pred: Any, timeout: float) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            evs = self.events(name)
            if pred(evs):
                return evs
            if time.monotonic() > deadline:
                raise TimeoutError(f"node {name}: condition not met after {timeout} s ({len(evs)} events)")
            time.sleep(0.2)

    def runs(self) -> list[list[str]]:
        path = self.root / "runs.log"
        return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def overlapping_runs(runs: list[list[str]]) -> list[str]:
    """Tasks that had two runs at once, not counting runs whose node was killed while they ran (those are
    interrupted: the policy runs them again, and their orphans end when the node comes back)."""
    running: dict[str, dict[tuple[str, str], bool]] = {}  # task -> {(node, pid): interrupted}
    bad: list[str] = []
    for r in runs:
        kind, task, node, pid = r[0], r[1], r[2], r[3]
        if kind == "kill":
            for live in running.values():
                for key in live:
                    if key[0] == task:  # a "kill NODE" line: its second field is the node killed
                        live[key] = True
            continue
        live = running.setdefault(task, {})
        if kind == "start":
            others = [k for k, interrupted in live.items() if not interrupted]
            if others:
                bad.append(f"{task}: started on {node} while {others} ran")
            live[(node, pid)] = False
        else:
            live.pop((node, pid), None)
    return bad


def runs_after_pass(runs: list[list[str]], passed_at: dict[str, int]) -> list[str]:
    """Starts of a task after the line where its passing run ended (``passed_at``: task -> index)."""
    return [f"{r[1]} started again on {r[2]}" for i, r in enumerate(runs)
            if r[0] == "start" and r[1] in passed_at and i > passed_at[r[1]]]


def ticking(root: Path, seconds: float, then: str) -> str:
    """A description that works ``seconds`` in 0.1 s steps, logging a tick after each, then runs ``then``."""
    steps = max(1, round(seconds * 10))
    return (f"for i in $(seq {steps}); do sleep 0.1; echo \"tick $POLPO_TASK_ID $POLPO_CLUSTER_NODE $$ "
            f"$EPOCHREALTIME\" >> {root}/runs.log; done; {then}")


def overlaps(runs: list[list[str]]) -> dict[str, float]:
    """Per task that ran more than once: the longest time two of its runs were both alive, by the agents' own
    lines (a run lasts from its ``start`` to its ``end``, or to its last ``tick`` when it was killed)."""
    spans: dict[tuple[str, str, str], list[float]] = {}  # (task, node, pid) -> [start, last seen]
    for r in runs:
        if r[0] in ("start", "tick", "end"):
            t = float(r[-1])
            span = spans.setdefault((r[1], r[2], r[3]), [t, t])
            span[1] = max(span[1], t)
    by_task: dict[str, list[list[float]]] = {}
    for (task, _, _), span in spans.items():
        by_task.setdefault(task, []).append(span)
    out: dict[str, float] = {}
    for task, ss in by_task.items():
        if len(ss) > 1:
            out[task] = max(max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
                            for i, a in enumerate(ss) for b in ss[i + 1:])
    return out


def gapless(events: list[dict[str, Any]]) -> bool:
    seqs = [e["seq"] for e in events]
    return seqs == list(range(1, len(seqs) + 1))


def orphans(marker: Path) -> list[int]:
    """Pids of live processes whose command line names the test's root folder (the agents' runs.log path)."""
    found = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes()
            stat = (p / "stat").read_text()
        except OSError:
            continue
        if str(marker).encode() in cmd and ") Z " not in stat and "polpo" not in cmd.decode(errors="replace"):
            found.append(int(p.name))
    return found


# The SQL that ends the leader's term at the database while its lease holds (a person's hand on the row, as a new
# election would): the row names nobody, in a new term; the deposed leader steps down, and any node may be elected.
END_LEADER_TERM = "UPDATE leader SET node = '', incarnation = '', term = term + 1 RETURNING 1"


@contextmanager
def cluster_on(postgres: PgCluster, name: str) -> Iterator[tuple[Cluster, PgCluster, str]]:
    """A cluster of daemons (none started yet) on a fresh database ``name``; every node stopped, and the
    database dropped, afterwards."""
    db = postgres.create_database(name)
    c = Cluster(Path(tempfile.mkdtemp(prefix=f"polpo-{name}-")), postgres.url(db))
    try:
        yield c, postgres, db
    finally:
        c.stop_all()
        postgres.drop_database(db)
