"""One mission of N independent trivial tasks (command agent `true`), concurrency 8.

Usage: .venv/bin/python scripts/bench_throughput.py [--sizes 1000 10000 50000] [--runs 1]
Reports wall time (drop → mission:completed), ms per task, CPU ms per task (the daemon's user+sys plus
its agents', counted from the drop; `own` is the daemon alone) and the daemon's peak RSS.
Goals: 1 000 tasks within 2× the floor (scripts/bench_floor.py --compare); per-task time growing < 1.5×
from 1 000 to 10 000; peak RSS flat, ≤ 150 MB at 50 000.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_common import Run, bench_daemon, median, run_mission, trivial_tasks


def measure_polpo(n: int, concurrency: int = 8) -> Run:
    """One fresh daemon, one mission of ``n`` trivial tasks."""
    with bench_daemon(concurrency=concurrency) as (root, proc):
        run = run_mission(root, proc, f"n{n}", {"tasks": trivial_tasks(n)}, timeout=3600)
    assert run.report["tasks"]["done"] == n, run.report
    return run


def line(run: Run) -> str:
    return (f"N={run.tasks:>6}: wall {run.wall:8.2f} s, {run.ms_per_task:6.2f} ms/task, "
            f"CPU {run.cpu_ms_per_task:5.2f} ms/task (own {run.self_cpu_ms_per_task:5.2f}), "
            f"peak RSS {run.peak_rss_mb:6.1f} MB")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--runs", type=int, default=1, help="runs per size; medians are printed when > 1")
    args = ap.parse_args()
    per_task: dict[int, float] = {}
    for n in args.sizes:
        runs = []
        for _ in range(args.runs):
            runs.append(measure_polpo(n, args.concurrency))
            print(line(runs[-1]), flush=True)
        per_task[n] = median([r.ms_per_task for r in runs])
        if args.runs > 1:
            print(f"N={n:>6}: median of {args.runs}: {per_task[n]:.2f} ms/task, "
                  f"CPU {median([r.cpu_ms_per_task for r in runs]):.2f} ms/task, "
                  f"peak RSS {median([r.peak_rss_mb for r in runs]):.1f} MB", flush=True)
    sizes = sorted(per_task)
    for a, b in itertools.pairwise(sizes):
        if a >= 1000:
            print(f"per-task growth {a} → {b}: {per_task[b] / per_task[a]:.2f}x (goal < 1.5x)")


if __name__ == "__main__":
    main()
