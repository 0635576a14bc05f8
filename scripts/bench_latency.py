"""Drop → mission:completed latency: a 1-task mission and a 10-task dependency chain.

Usage: .venv/bin/python scripts/bench_latency.py [--runs 10]
Goals (issue 3): ≤ 0.5 s for one task, ≤ 1.5 s for the 10-task chain (medians).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_common import bench_daemon, drop, median, ts, wait_for


def task(i: int, deps: list[str]) -> dict:
    return {"title": f"t{i}", "description": "noop", "assignTo": "noop", "dependsOn": deps,
            "expectations": [{"type": "file_exists", "path": "."}]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    one, chain = [], []
    with bench_daemon(concurrency=8) as (root, _):
        for r in range(args.runs):
            t0 = drop(root, f"one-{r}.json", {"tasks": [task(0, [])]})
            ev = wait_for(root, lambda e, r=r: e["event"] == "mission:completed" and e["missionId"] == f"one-{r}")
            one.append(ts(ev) - t0)
        for r in range(args.runs):
            tasks = [task(i, [f"t{i - 1}"] if i else []) for i in range(10)]
            t0 = drop(root, f"chain-{r}.json", {"tasks": tasks})
            ev = wait_for(root, lambda e, r=r: e["event"] == "mission:completed" and e["missionId"] == f"chain-{r}")
            chain.append(ts(ev) - t0)
    print(f"1 task:        median {median(one):.3f} s  (min {min(one):.3f}, max {max(one):.3f}, n={len(one)})  goal ≤ 0.5 s")
    print(f"10-task chain: median {median(chain):.3f} s  (min {min(chain):.3f}, max {max(chain):.3f}, n={len(chain)})  goal ≤ 1.5 s")


if __name__ == "__main__":
    main()
