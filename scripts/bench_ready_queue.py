"""Two scheduling shapes that were quadratic: an agent limit below the global one, and a wide gate.

Usage: .venv/bin/python scripts/bench_ready_queue.py [--sizes 1000 4000] [--runs 1] [--only limit|gate]
(a) limit: N trivial tasks on an agent with max_concurrency = 4 under the global 8 (waiting tasks are
    parked under the agent's key and must not all be re-queued on every finish).
(b) gate:  N trivial tasks, one quality gate whose afterTasks lists all N, and one task it blocks (the
    gate is looked up and evaluated as each afterTask finishes).
Each prints ms/task and CPU ms/task (drop → mission:completed) per N and the growth factor from the
smallest to the largest N. Goal: linear, i.e. per-task cost growing < 1.3× from 1 000 to 4 000.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from bench_common import Run, bench_daemon, median, run_mission, trivial_tasks

AGENT_LIMIT = 4


def limit_run(n: int) -> Run:
    with bench_daemon(concurrency=8, agent_limit=AGENT_LIMIT) as (root, proc):
        run = run_mission(root, proc, f"limit{n}", {"tasks": trivial_tasks(n)}, timeout=3600)
    assert run.report["tasks"]["done"] == n, run.report
    return run


def gate_doc(n: int) -> dict[str, Any]:
    tasks = [*trivial_tasks(n), {"title": "after-gate", "description": "noop", "assignTo": "noop"}]
    gate = {"name": "wide", "afterTasks": [f"t{i}" for i in range(n)], "blocksTasks": ["after-gate"]}
    return {"tasks": tasks, "qualityGates": [gate]}


def gate_run(n: int) -> Run:
    with bench_daemon(concurrency=8) as (root, proc):
        run = run_mission(root, proc, f"gate{n}", gate_doc(n), timeout=3600)
    assert run.report["tasks"]["done"] == n + 1, run.report
    return run


def bench(label: str, fn: Any, sizes: list[int], runs: int) -> None:
    wall: dict[int, float] = {}
    cpu: dict[int, float] = {}
    for n in sizes:
        rs = [fn(n) for _ in range(runs)]
        wall[n] = median([r.ms_per_task for r in rs])
        cpu[n] = median([r.cpu_ms_per_task for r in rs])
        print(f"{label} N={n:>5}: {wall[n]:6.2f} ms/task, CPU {cpu[n]:5.2f} ms/task "
              f"(own {median([r.self_cpu_ms_per_task for r in rs]):5.2f}; median of {runs})", flush=True)
    lo, hi = min(sizes), max(sizes)
    if lo != hi:
        print(f"{label} growth {lo} → {hi}: wall {wall[hi] / wall[lo]:.2f}x, CPU {cpu[hi] / cpu[lo]:.2f}x "
              "per task (goal < 1.3x)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000])
    ap.add_argument("--runs", type=int, default=1, help="runs per size (medians are reported)")
    ap.add_argument("--only", choices=["limit", "gate"])
    args = ap.parse_args()
    if args.only in (None, "limit"):
        bench(f"agent limit {AGENT_LIMIT}/8", limit_run, args.sizes, args.runs)
    if args.only in (None, "gate"):
        bench("gate over N", gate_run, args.sizes, args.runs)


if __name__ == "__main__":
    main()
