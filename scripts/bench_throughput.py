"""One mission of N independent trivial tasks (command agent `true`), concurrency 8.

Usage: .venv/bin/python scripts/bench_throughput.py [--sizes 100 1000 10000]
Reports wall time (drop → mission:completed), time per task and the daemon's peak RSS.
Goals (issue 3): 1 000 tasks ≤ 5 s; 10 000 ≤ 60 s with per-task time growing < 1.5× from 1 000 to
10 000; peak RSS ≤ 150 MB.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_common import bench_daemon, drop, peak_rss_mb, ts, wait_for


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    per_task = {}
    for n in args.sizes:
        with bench_daemon(concurrency=args.concurrency) as (root, proc):
            doc = {"tasks": [{"title": f"t{i}", "description": "noop", "assignTo": "noop"} for i in range(n)]}
            t0 = drop(root, f"n{n}.json", doc)
            ev = wait_for(root, lambda e: e["event"] == "mission:completed", timeout=900)
            wall = ts(ev) - t0
            rss = peak_rss_mb(proc.pid)
        assert ev["data"]["report"]["tasks"]["done"] == n, ev["data"]["report"]
        per_task[n] = wall / n
        print(f"N={n:>6}: wall {wall:8.2f} s, {1000 * wall / n:6.2f} ms/task, peak RSS {rss:6.1f} MB", flush=True)
    if 1000 in per_task and 10000 in per_task:
        print(f"per-task growth 1 000 → 10 000: {per_task[10000] / per_task[1000]:.2f}x (goal < 1.5x)")


if __name__ == "__main__":
    main()
