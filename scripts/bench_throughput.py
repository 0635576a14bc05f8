"""N independent trivial tasks (command agent `true`), concurrency 8: one mission, or for N above 10 000 (the most
one mission file may hold) missions of 10 000 dropped at once.

Usage: .venv/bin/python scripts/bench_throughput.py [--sizes 1000 10000 50000] [--runs 1] [--store sqlite pg]
       [--store-url postgresql://user@host:port/db] [--sequential]
Reports wall time (drop → mission:completed), ms per task, CPU ms per task (the daemon's user+sys plus
its agents', counted from the drop; `own` is the daemon alone) and the daemon's peak RSS, per store; each run
goes through the stores in turn (so machine noise hits both) and, with both, prints PostgreSQL / SQLite.
``pg`` uses ``--store-url`` (an empty database; its tables are dropped before each run) or, without it, a
private throw-away cluster from tests/support/postgres.py (fsync off) with a fresh database per run.
Goals: 1 000 tasks within 2× the floor (scripts/bench_floor.py --compare); per-task time growing < 1.5×
from 1 000 to 10 000; peak RSS flat, ≤ 150 MB at 50 000; on PostgreSQL ≤ 1.5× SQLite.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from bench_common import Run, bench_daemon, median, run_tasks


def measure_polpo(n: int, concurrency: int = 8, store_url: str | None = None, sequential: bool = False) -> Run:
    """One fresh daemon, one mission of ``n`` trivial tasks (above 10 000: several, at once or ``sequential``)."""
    with bench_daemon(concurrency=concurrency, store_url=store_url) as (root, proc):
        run = run_tasks(root, proc, f"n{n}", n, timeout=3600, sequential=sequential)
    assert run.report["tasks"]["done"] == n, run.report
    return run


def line(run: Run, store: str = "sqlite") -> str:
    return (f"{store:<6} N={run.tasks:>6}: wall {run.wall:8.2f} s, {run.ms_per_task:6.2f} ms/task, "
            f"CPU {run.cpu_ms_per_task:5.2f} ms/task (own {run.self_cpu_ms_per_task:5.2f}), "
            f"peak RSS {run.peak_rss_mb:6.1f} MB")


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
    ap.add_argument("--runs", "--repeat", type=int, default=1, help="runs per size; medians are printed when > 1")
    ap.add_argument("--store", nargs="+", choices=["sqlite", "pg"], default=["sqlite"])
    ap.add_argument("--store-url", help="an existing PostgreSQL database for `pg` (emptied before each run)")
    ap.add_argument("--sequential", action="store_true",
                    help="above 10 000 tasks, drop each mission once the one before completed (not all at once)")
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        fresh_pg = stack.enter_context(pg_databases(args.store_url)) if "pg" in args.store else None
        per_task: dict[tuple[str, int], float] = {}
        for n in args.sizes:
            runs: dict[str, list[Run]] = {s: [] for s in args.store}
            for _ in range(args.runs):
                for store in args.store:
                    url = fresh_pg() if store == "pg" and fresh_pg is not None else None
                    runs[store].append(measure_polpo(n, args.concurrency, url, args.sequential))
                    print(line(runs[store][-1], store), flush=True)
            for store, rs in runs.items():
                per_task[(store, n)] = median([r.ms_per_task for r in rs])
                if args.runs > 1:
                    print(f"{store:<6} N={n:>6}: median of {args.runs}: {per_task[(store, n)]:.2f} ms/task, "
                          f"CPU {median([r.cpu_ms_per_task for r in rs]):.2f} ms/task, "
                          f"peak RSS {median([r.peak_rss_mb for r in rs]):.1f} MB", flush=True)
            if {"sqlite", "pg"} <= set(args.store):
                print(f"N={n:>6}: PostgreSQL / SQLite = {per_task[('pg', n)] / per_task[('sqlite', n)]:.2f}x "
                      "(goal ≤ 1.5x)", flush=True)
        for store in args.store:
            sizes = sorted(n for s, n in per_task if s == store)
            for a, b in itertools.pairwise(sizes):
                if a >= 1000:
                    print(f"{store} per-task growth {a} → {b}: {per_task[(store, b)] / per_task[(store, a)]:.2f}x "
                          "(goal < 1.5x)")


if __name__ == "__main__":
    main()
