"""Shared helpers for the benchmarks: a throw-away daemon on a temp folder, timed through its event log.

The daemon is driven only through its config, its missions folder, its event log and /proc (CPU, RSS,
write syscalls), so the benchmarks work whatever the engine's insides look like.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from polpo.mission.jsonbytes import MAX_ENTRIES  # the most tasks one mission file may hold

CONFIG = """
[daemon]
missions_dir = "missions"
state_dir = "state"
max_concurrency = {concurrency}

[agents.noop]
type = "command"
command = ["true"]
timeout = 60
"""

#: The trivial agent's command, for programs that must do the same work as the daemon (bench_floor).
TRIVIAL_COMMAND = ["true"]


def write_bytecode() -> None:
    """Write polpo's .pyc files, as pip does when it installs polpo. A checkout run with PYTHONDONTWRITEBYTECODE=1
    (this project's own shells set it) otherwise compiles every polpo module it imports, in every process: ~30 ms
    of a `polpo status`, more of a daemon's start, that no installed polpo pays."""
    import compileall

    compileall.compile_dir(Path(__file__).resolve().parents[1] / "polpo", quiet=1)


@contextmanager
def bench_daemon(concurrency: int = 8, *, agent_limit: int | None = None, python_args: list[str] | None = None,
                 keep: bool = False, store_url: str | None = None, extra: str = "",
                 ) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A daemon on a fresh temp folder with one command agent ``noop`` (runs ``true``).

    ``agent_limit`` sets the agent's ``max_concurrency``; ``python_args`` go before ``-m polpo`` (for
    ``-m cProfile -o FILE``); ``store_url`` puts the state in that PostgreSQL database instead of SQLite in the
    folder; ``extra`` is more config (e.g. an ``[http]`` table). The folder is deleted once the daemon has stopped,
    unless ``keep``.
    """
    root = Path(tempfile.mkdtemp(prefix="polpo-bench-"))
    (root / "missions").mkdir()
    config = CONFIG.format(concurrency=concurrency)
    if agent_limit is not None:
        config += f"max_concurrency = {agent_limit}\n"
    if store_url:
        config += f'\n[store]\nurl = "{store_url}"\n'
    (root / "polpo.toml").write_text(config + extra)
    proc = subprocess.Popen([sys.executable, *(python_args or []), "-m", "polpo", "daemon",
                             "--config", str(root / "polpo.toml")],
                            stdout=subprocess.DEVNULL, stderr=(root / "daemon.log").open("w"), text=True)
    try:
        wait_for(root, lambda e: e["event"] == "orchestrator:started", timeout=60)
        time.sleep(0.3)  # let the watcher settle in
        yield root, proc
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def events(root: Path) -> list[dict[str, Any]]:
    p = root / "state" / "events.jsonl"
    if not p.exists():
        return []
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


def wait_for(root: Path, pred: Any, timeout: float = 600) -> dict[str, Any]:
    """Follow events.jsonl incrementally (never re-reading it: the bench must not compete for the CPU)."""
    deadline = time.monotonic() + timeout
    path = root / "state" / "events.jsonl"
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    with open(path) as f:
        buf = ""
        while time.monotonic() < deadline:
            chunk = f.read()
            if not chunk:
                time.sleep(0.01)
                continue
            buf += chunk
            *lines, buf = buf.split("\n")
            for line in lines:
                if line.strip():
                    ev: dict[str, Any] = json.loads(line)
                    if pred(ev):
                        return ev
    raise TimeoutError("event not seen")


def drop(root: Path, name: str, doc: dict[str, Any]) -> float:
    """Write a mission atomically; return the wall time of the rename."""
    tmp = root / "missions" / f".{name}.tmp"
    tmp.write_text(json.dumps(doc))
    t = time.time()
    os.replace(tmp, root / "missions" / name)
    return t


def ts(ev: dict[str, Any]) -> float:
    return datetime.fromisoformat(ev["ts"].replace("Z", "+00:00")).timestamp()


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def median(xs: list[float]) -> float:
    return statistics.median(xs)


_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(own user+sys, reaped children's user+sys) CPU seconds of a live daemon, from /proc/PID/stat. Its own
    helper processes (the spawner, the guards: children that run ``polpo.tools.*``) count as its own, and what
    they reaped (the spawner's agents) as its children's: a helper is reaped, and its CPU counted by the kernel,
    only when the daemon ends."""
    own, kids = _stat_cpu(pid)
    for helper in _helpers(pid):
        with contextlib.suppress(OSError, ValueError):
            h_own, h_kids = _stat_cpu(helper)
            own, kids = own + h_own, kids + h_kids
    return own, kids


def _stat_cpu(pid: int) -> tuple[float, float]:
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rfind(")") + 2:].split()  # fields[0] is field 3 (state)
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])  # fields 14-17
    return (utime + stime) / _TICK, (cutime + cstime) / _TICK


def _helpers(daemon: int) -> list[int]:
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                raw = (p / "stat").read_text()
                if int(raw[raw.rfind(")") + 2:].split()[1]) == daemon and b"polpo.tools." in (p / "cmdline").read_bytes():
                    found.append(int(p.name))
    return found


def write_syscalls(pid: int) -> int:
    """How many write-type syscalls ``pid`` has made (``syscw`` of /proc/PID/io; needs the same user or root)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("syscw:"):
            return int(line.split()[1])
    return 0


@dataclass
class Run:
    """One mission measured from its drop to its ``mission:completed``."""

    tasks: int
    wall: float  # seconds, drop → mission:completed
    cpu_self: float  # daemon CPU seconds during the run (user+sys)
    cpu_children: float  # CPU seconds of the children it reaped during the run (the agents)
    peak_rss_mb: float  # the daemon's VmHWM at the end (includes start-up)
    report: dict[str, Any]

    @property
    def ms_per_task(self) -> float:
        return 1000 * self.wall / self.tasks

    @property
    def cpu_ms_per_task(self) -> float:
        return 1000 * (self.cpu_self + self.cpu_children) / self.tasks

    @property
    def self_cpu_ms_per_task(self) -> float:
        return 1000 * self.cpu_self / self.tasks


class Rejected(RuntimeError):
    """The daemon rejected a benchmark's mission (the message lists its problems)."""


def _finished(names: set[str]) -> Any:
    """An event predicate: a mission of ``names`` completed (True) or was rejected (raises :class:`Rejected`)."""
    def pred(e: dict[str, Any]) -> bool:
        if e.get("missionId") not in names:
            return False
        if e["event"] == "mission:rejected":
            raise Rejected(f"{e['missionId']} rejected: {e['data'].get('lines') or e['data']}")
        return bool(e["event"] == "mission:completed")
    return pred


def run_mission(root: Path, proc: subprocess.Popen[str], name: str, doc: dict[str, Any],
                timeout: float = 1800) -> Run:
    """Drop ``doc`` as ``name``.json and wait for its completion; CPU is counted from the drop on."""
    own0, kids0 = cpu_seconds(proc.pid)
    t0 = drop(root, f"{name}.json", doc)
    ev = wait_for(root, _finished({name}), timeout=timeout)
    own1, kids1 = cpu_seconds(proc.pid)
    n = len(doc["tasks"])
    return Run(n, ts(ev) - t0, own1 - own0, kids1 - kids0, peak_rss_mb(proc.pid), ev["data"]["report"])


def run_tasks(root: Path, proc: subprocess.Popen[str], name: str, n: int, timeout: float = 3600,
              sequential: bool = False) -> Run:
    """``n`` trivial tasks: one mission ``name`` when a mission file may hold them (at most ``MAX_ENTRIES``, the
    daemon's limit on one list), else missions ``name-1`` … ``name-k`` of at most that many, dropped one after
    the other at once (``sequential``: each once the one before completed); timed from the first drop to the last
    completion, with the reports' task counts summed."""
    if n <= MAX_ENTRIES:
        return run_mission(root, proc, name, {"tasks": trivial_tasks(n)}, timeout=timeout)
    sizes = [min(MAX_ENTRIES, n - i) for i in range(0, n, MAX_ENTRIES)]
    docs = {f"{name}-{k + 1}": {"tasks": trivial_tasks(size)} for k, size in enumerate(sizes)}
    if sequential:
        own0, kids0 = cpu_seconds(proc.pid)
        runs = [run_mission(root, proc, mid, doc, timeout=timeout) for mid, doc in docs.items()]
        own1, kids1 = cpu_seconds(proc.pid)
        totals = {key: sum(r.report["tasks"].get(key, 0) for r in runs) for key in ("total", "done", "failed")}
        return Run(n, sum(r.wall for r in runs), own1 - own0, kids1 - kids0, peak_rss_mb(proc.pid),
                   {"tasks": totals, "missions": len(docs)})
    own0, kids0 = cpu_seconds(proc.pid)
    t0 = min(drop(root, f"{mid}.json", doc) for mid, doc in docs.items())
    completed: list[dict[str, Any]] = []
    finished = _finished(set(docs))

    def all_done(e: dict[str, Any]) -> bool:  # one pass over the log, however many missions
        if finished(e):
            completed.append(e)
        return len(completed) == len(docs)

    wait_for(root, all_done, timeout=timeout)
    own1, kids1 = cpu_seconds(proc.pid)
    last = max(ts(e) for e in completed)
    totals = {key: sum(e["data"]["report"]["tasks"].get(key, 0) for e in completed)
              for key in ("total", "done", "failed")}
    return Run(n, last - t0, own1 - own0, kids1 - kids0, peak_rss_mb(proc.pid),
               {"tasks": totals, "missions": len(docs)})


def trivial_tasks(n: int) -> list[dict[str, Any]]:
    """``n`` independent tasks for the ``noop`` agent, no checks: the daemon's cheapest path."""
    return [{"title": f"t{i}", "description": "noop", "assignTo": "noop"} for i in range(n)]
