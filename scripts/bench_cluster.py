"""Throughput of 1, 2 and 3 daemons on one PostgreSQL, and the claim latency.

    .venv/bin/python scripts/bench_cluster.py [--tasks 2000] [--sleep 0.5] [--concurrency 8] [--nodes 1 2 3]

Each run: a fresh database on a private PostgreSQL (tests/support/postgres.py, fsync off), N daemon processes
(tests/support/cluster.py) with ``max_concurrency`` each, one mission of ``--tasks`` independent tasks whose agent
sleeps ``--sleep`` seconds, ``"affinity": "any"``. Throughput is tasks per second from the mission's acceptance
to its completion; the ratio is against one node (goals: ≥ 1.8× with 2 nodes, ≥ 2.5× with 3). Claim latency is
the time from a task's ``task:created`` (it is ready at once) or, once the first wave is running, from the end of
the task that freed its slot — measured simply as ``agent:spawned`` minus the later of ``task:created`` and the
previous ``task:transition`` to done on the same node — reported as median and p99. PostgreSQL against SQLite
for 1 000 trivial tasks on one daemon: ``scripts/bench_throughput.py --sizes 1000 --store sqlite pg``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.cluster import Cluster
from tests.support.postgres import running_cluster


def _t(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def run(pg_url: str, nodes: int, tasks: int, sleep: float, concurrency: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="polpo-bench-cluster-"))
    c = Cluster(root, pg_url)
    names = [f"n{i + 1}" for i in range(nodes)]
    try:
        for name in names:
            c.add(name, concurrency=concurrency, lease=10)
            c.start(name)
        for name in names:
            c.wait(name, lambda evs, n=name: any(e["event"] == "orchestrator:started" and e.get("node") == n
                                                 for e in evs), 60)
        spec = {"name": "bench", "workspace": str(c.shared / "bench"), "settings": {"affinity": "any"},
                "tasks": [{"title": f"B{i}", "assignTo": "shell", "description": f"sleep {sleep}"}
                          for i in range(tasks)]}
        (c.missions / "bench.json").write_text(json.dumps(spec))
        evs = c.wait(names[0], lambda evs: any(e["event"] == "mission:completed" for e in evs), 3600)
    finally:
        c.stop_all()
    accepted = _t(next(e["ts"] for e in evs if e["event"] == "mission:accepted"))
    completed = _t(next(e["ts"] for e in evs if e["event"] == "mission:completed"))
    created = {e["taskId"]: _t(e["ts"]) for e in evs if e["event"] == "task:created"}
    last_free: dict[str, float] = {}  # node -> when a task it ran last finished
    waits: list[float] = []
    for e in evs:
        if e["event"] == "task:transition" and e["data"].get("to") == "done":
            last_free[e["node"]] = _t(e["ts"])
        elif e["event"] == "agent:spawned":
            ready = max(created.get(e["taskId"], 0.0), last_free.get(e["node"], 0.0))
            waits.append(_t(e["ts"]) - ready)
    waits.sort()
    per_node = {n: sum(1 for e in evs if e["event"] == "agent:spawned" and e["node"] == n) for n in names}
    return {"wall": completed - accepted, "rate": tasks / (completed - accepted),
            "claim_median_ms": statistics.median(waits) * 1000, "claim_p99_ms": waits[int(len(waits) * 0.99) - 1] * 1000,
            **{f"tasks_{n}": float(v) for n, v in per_node.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--sleep", type=float, default=0.5)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 3])
    args = ap.parse_args()
    with running_cluster() as pg:
        print(f"PostgreSQL: private cluster on 127.0.0.1:{pg.port} (fsync off); {args.tasks} tasks x "
              f"{args.sleep} s, concurrency {args.concurrency} per node")
        base: float | None = None
        for n in args.nodes:
            db = pg.create_database("bench")
            t0 = time.monotonic()
            r = run(pg.url(db), n, args.tasks, args.sleep, args.concurrency)
            pg.drop_database(db)
            if base is None:
                base = r["rate"]  # the first count given (1 by default) is the reference
            ratio = r["rate"] / base
            spread = " ".join(f"{k[6:]}={int(v)}" for k, v in r.items() if k.startswith("tasks_"))
            print(f"{n} node(s): {r['wall']:7.1f} s, {r['rate']:6.1f} tasks/s, {ratio:4.2f}x one node; "
                  f"claim latency median {r['claim_median_ms']:.0f} ms, p99 {r['claim_p99_ms']:.0f} ms; "
                  f"tasks per node {spread}  (run {time.monotonic() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
