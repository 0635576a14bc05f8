"""Starting programs: how fast ``run_process`` starts trivial programs, and how long the event loop stalls meanwhile.

Usage: .venv/bin/python scripts/bench_spawn.py [--n 3000] [--runs 3] [--hog] [--against OTHER_CHECKOUT]

Each run starts ``true`` N times at concurrency 8 (the throughput bench's) through
``polpo.tools.procs.run_process``, with a small stdin, in a fresh interpreter, while a ticker in the same event
loop sleeps 1 ms over and over and records by how much each sleep overshot: the loop's lag, which is what a
heartbeat, a lease renewal or an HTTP request waits. Prints ms per program and the lag's p50/p99/max. ``--hog``
keeps one CPU busy meanwhile (a machine whose agents work); ``--against`` alternates runs with another checkout's
polpo (its folder is put first on PYTHONPATH) and prints both sides' medians.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import asyncio, json, sys, time
from pathlib import Path
from polpo.clock import SystemClock
from polpo.tools.procs import minimal_env, run_process

async def main(n):
    lags, stop = [], False
    async def ticker():
        while not stop:
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - t - 0.001)
    tick = asyncio.ensure_future(ticker())
    sem = asyncio.Semaphore(8)
    async def one():
        async with sem:
            r = await run_process(["true"], cwd=Path("/"), env=minimal_env(), clock=SystemClock(), stdin=b"{}")
            assert r.exit_code == 0, r
    await run_process(["true"], cwd=Path("/"), env=minimal_env(), clock=SystemClock())  # (start-up not counted)
    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    wall = time.perf_counter() - t0
    stop = True
    await tick
    lags.sort()
    at = lambda p: 1000 * lags[int(p * (len(lags) - 1))]
    print(json.dumps({"ms": 1000 * wall / n, "p50": at(0.5), "p99": at(0.99), "max": 1000 * lags[-1]}))

asyncio.run(main(int(sys.argv[1])))
"""


def run_once(checkout: Path, n: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run([sys.executable, "-c", PROBE, str(n)], env=env, cwd=checkout,  # ('' on sys.path: checkout)
                         capture_output=True, text=True, check=True, timeout=600).stdout
    return dict(json.loads(out.splitlines()[-1]))


@contextlib.contextmanager
def hog(on: bool) -> Iterator[None]:
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if on else None
    try:
        yield
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()


def show(name: str, runs: list[dict[str, float]]) -> str:
    med = {k: statistics.median(r[k] for r in runs) for k in ("ms", "p50", "p99", "max")}
    each = ", ".join(f"{r['ms']:.3f}" for r in runs)
    return (f"{name:<8} {med['ms']:.3f} ms/program ({each}); loop lag p50 {med['p50']:.2f} ms, "
            f"p99 {med['p99']:.2f} ms, max {med['max']:.1f} ms (medians of {len(runs)})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=3000, help="programs per run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--hog", action="store_true", help="keep one CPU busy during the runs")
    ap.add_argument("--against", type=Path, help="another checkout, measured in alternation with this one")
    args = ap.parse_args()
    sides = {"this": ROOT, **({"against": args.against.resolve()} if args.against else {})}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    with hog(args.hog):
        for _ in range(args.runs):
            for name, checkout in sides.items():
                results[name].append(run_once(checkout, args.n))
    print(f"N={args.n}, concurrency 8{', one CPU kept busy' if args.hog else ''}")
    for name, runs in results.items():
        print(show(name, runs))


if __name__ == "__main__":
    main()
