"""Where the daemon's memory goes with many tasks: RSS over a run, and bytes per waiting task in-process.

Usage: .venv/bin/python scripts/bench_memory.py [--sizes 10000 50000] [--concurrency 8] [--inproc N]

Daemon (default): a fresh daemon per size, N trivial tasks dropped at once as in bench_throughput (missions of
at most 10 000). The daemon's RSS is read from /proc while it works: idle before the drop, when every task is
admitted (the N-th ``task:created``), its peak (VmHWM), when the last mission completed, and 2 s later (what
finished missions leave behind). ``per admitted task`` = (RSS when all admitted - idle) / N.
Goal (issue 14): peak ≤ 150 MB at 50 000, and RSS after the run back near idle.

``--inproc N``: no daemon; tracemalloc over what admission does with one mission of N tasks (the check in the
intake thread, then the kept mission with its tasks on a board): Python bytes per task at the check's peak and
kept per waiting task, and whether a waiting task holds a parsed spec.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from bench_common import bench_daemon, drop, peak_rss_mb, trivial_tasks, wait_for

from polpo.mission.jsonbytes import MAX_ENTRIES


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Sampler(threading.Thread):
    """VmRSS every ``every`` seconds, so a short peak between two events is still seen."""

    def __init__(self, pid: int, every: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.samples: list[tuple[float, float]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stop.is_set():
            try:
                self.samples.append((time.monotonic() - t0, rss_mb(self.pid)))
            except OSError:
                return
            self.stop.wait(self.every)


def measure_daemon(n: int, concurrency: int) -> dict[str, float]:
    with bench_daemon(concurrency=concurrency) as (root, proc):
        time.sleep(1)
        idle = rss_mb(proc.pid)
        sizes = [min(MAX_ENTRIES, n - i) for i in range(0, n, MAX_ENTRIES)]
        names = {f"m{k + 1}" for k in range(len(sizes))}
        sampler = Sampler(proc.pid)
        sampler.start()
        t0 = time.monotonic()
        for k, size in enumerate(sizes):
            drop(root, f"m{k + 1}.json", {"tasks": trivial_tasks(size)})
        seen = {"created": 0, "completed": 0}
        marks: dict[str, float] = {}

        def watch(e: dict[str, Any]) -> bool:
            if e["event"] == "task:created":
                seen["created"] += 1
                if seen["created"] == n:
                    marks["admitted"] = rss_mb(proc.pid)
                    marks["admitted_s"] = time.monotonic() - t0
            elif e["event"] == "mission:rejected" and e.get("missionId") in names:
                raise RuntimeError(f"rejected: {e['data']}")
            elif e["event"] == "mission:completed" and e.get("missionId") in names:
                seen["completed"] += 1
            return seen["completed"] == len(sizes)

        wait_for(root, watch, timeout=7200)
        end = rss_mb(proc.pid)
        wall = time.monotonic() - t0
        time.sleep(2)
        after = rss_mb(proc.pid)
        sampler.stop.set()
        sampler.join()
        at, top = max(sampler.samples, key=lambda s: s[1])
        return {"n": n, "idle": idle, "admitted": marks.get("admitted", float("nan")),
                "admitted_s": marks.get("admitted_s", float("nan")), "peak": peak_rss_mb(proc.pid),
                "sampled_peak": top, "peak_s": at, "end": end, "after": after, "wall": wall,
                "timeline": " ".join(f"{t:.0f}s:{r:.0f}" for t, r in sampler.samples[::max(1, len(sampler.samples) // 12)])}


def measure_inproc(n: int) -> None:
    """tracemalloc over the check and the admission of one mission of ``n`` tasks (no store, no daemon)."""
    import tempfile

    from polpo.agents.registry import AgentFactory
    from polpo.clock import FakeClock
    from polpo.config import load_config
    from polpo.engine.admission import Admission
    from polpo.engine.board import MissionBoard
    from polpo.intake.check import check_mission
    from polpo.store.memory import MemoryStore
    root = Path(tempfile.mkdtemp(prefix="polpo-mem-"))
    (root / "polpo.toml").write_text('[daemon]\nmissions_dir = "missions"\nstate_dir = "state"\n'
                                     '[agents.noop]\ntype = "command"\ncommand = ["true"]\n')
    cfg = load_config(root / "polpo.toml")
    clock = FakeClock()
    store = MemoryStore(clock)
    waiting: list[Any] = []
    board = MissionBoard(cfg, store, clock, on_ready=waiting.append, on_forget=lambda m: None)
    adm = Admission(cfg, store, clock, board, AgentFactory(cfg, clock))
    raw = json.dumps({"tasks": trivial_tasks(n)}).encode()
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    verdict = check_mission(raw, known_agents=["noop"], channels=None)
    assert verdict.spec is not None, verdict.problems
    check_peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.reset_peak()
    m = adm.build_mission(mid="m", run=1, spec=verdict.spec, source=str(root / "m.json"), digest="d", warnings=[])
    board.add(m)
    for t in m.tasks.values():
        board.make_ready(t)
    build_peak = tracemalloc.get_traced_memory()[1] - base
    del verdict
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    parsed = sum(t.spec_loaded for t in m.tasks.values())
    print(f"in-process, one mission of {n} tasks: check peak {check_peak / n:7.0f} B/task, "
          f"build peak {build_peak / n:7.0f} B/task, kept {kept / n:6.0f} B per waiting task "
          f"({kept / 2**20:.1f} MiB); waiting tasks holding a parsed spec: {parsed}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10000, 50000])
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--inproc", type=int, default=None, metavar="N", help="in-process tracemalloc of N tasks")
    args = ap.parse_args()
    if args.inproc:
        measure_inproc(args.inproc)
        return
    for n in args.sizes:
        r = measure_daemon(n, args.concurrency)
        per_task = 1024 * 1024 * (r["admitted"] - r["idle"]) / n
        print(f"N={n:>6}: idle {r['idle']:6.1f} MB, all admitted {r['admitted']:6.1f} MB "
              f"(after {r['admitted_s']:.1f} s; {per_task:5.0f} B per admitted task), peak {r['peak']:6.1f} MB "
              f"(sampled {r['sampled_peak']:6.1f} after {r['peak_s']:.0f} s), at the end {r['end']:6.1f} MB, 2 s later {r['after']:6.1f} MB; "
              f"wall {r['wall']:.1f} s\n        RSS over the run (MB): {r['timeline']}", flush=True)


if __name__ == "__main__":
    main()
