"""One mission of N independent trivial tasks (command agent `true`), concurrency 8.

Usage: .venv/bin/python scripts/bench_throughput.py [--sizes 100 1000 10000] [--store sqlite pg] [--repeat 3]
       [--store-url postgresql://user@host:port/db]
Reports wall time (drop → mission:completed), time per task and the daemon's peak RSS, per store; each repeat
runs the stores in turn (so machine noise hits both) and the summary gives medians and PostgreSQL / SQLite.
``pg`` uses ``--store-url`` (an empty database; its tables are dropped before each run) or, without it, a
private throw-away cluster from tests/support/postgres.py (fsync off) with a fresh database per run.
Goals (issue 3): 1 000 tasks ≤ 5 s; 10 000 ≤ 60 s with per-task time growing < 1.5× from 1 000 to
10 000; peak RSS ≤ 150 MB. Scale-out: 1 000 tasks on PostgreSQL ≤ 1.5× SQLite.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from bench_common import bench_daemon, drop, median, peak_rss_mb, ts, wait_for


def run_once(n: int, concurrency: int, store_url: str | None) -> tuple[float, float]:
    with bench_daemon(concurrency=concurrency, store_url=store_url) as (root, proc):
        doc = {"tasks": [{"title": f"t{i}", "description": "noop", "assignTo": "noop"} for i in range(n)]}
        t0 = drop(root, f"n{n}.json", doc)
        ev = wait_for(root, lambda e: e["event"] == "mission:completed", timeout=900)
        wall = ts(ev) - t0
        rss = peak_rss_mb(proc.pid)
    assert ev["data"]["report"]["tasks"]["done"] == n, ev["data"]["report"]
    return wall, rss


@contextlib.contextmanager
def pg_databases(url: str | None) -> Iterator[Callable[[], str]]:
    """A function giving an empty database for each run."""
    if url is not None:
        def reset() -> str:
            subprocess.run([sys.executable, "-c", _RESET, url], check=True)
            return url

        yield reset
        return
    from tests.support.postgres import running_cluster

    with running_cluster() as cluster:
        print(f"PostgreSQL {cluster.version}: private cluster on 127.0.0.1:{cluster.port} (fsync off)", flush=True)
        yield lambda: cluster.url(cluster.create_database("bench"))


_RESET = """
import sys, asyncio, asyncpg
async def main(url):
    c = await asyncpg.connect(url)
    await c.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    await c.close()
asyncio.run(main(sys.argv[1]))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--store", nargs="+", choices=["sqlite", "pg"], default=["sqlite"])
    ap.add_argument("--store-url", default=None, help="PostgreSQL database for `--store pg` (emptied per run)")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        new_db = stack.enter_context(pg_databases(args.store_url)) if "pg" in args.store else None
        walls: dict[tuple[str, int], list[float]] = {}
        for n in args.sizes:
            for r in range(args.repeat):
                for store in args.store:
                    url = new_db() if store == "pg" and new_db is not None else None
                    wall, rss = run_once(n, args.concurrency, url)
                    walls.setdefault((store, n), []).append(wall)
                    print(f"{store:>6} N={n:>6} run {r + 1}: wall {wall:8.2f} s, {1000 * wall / n:6.2f} ms/task, "
                          f"peak RSS {rss:6.1f} MB", flush=True)
    for n in args.sizes:
        meds = {store: median(walls[(store, n)]) for store in args.store}
        line = ", ".join(f"{store} {m:.2f} s ({1000 * m / n:.2f} ms/task)" for store, m in meds.items())
        ratio = f"; pg/sqlite {meds['pg'] / meds['sqlite']:.2f}x (goal ≤ 1.5x)" if len(meds) == 2 else ""
        print(f"N={n}: median of {args.repeat}: {line}{ratio}")
    for store in args.store:
        if (store, 1000) in walls and (store, 10000) in walls:
            growth = median(walls[(store, 10000)]) / 10 / median(walls[(store, 1000)])
            print(f"{store}: per-task growth 1 000 → 10 000: {growth:.2f}x (goal < 1.5x)")


if __name__ == "__main__":
    main()
