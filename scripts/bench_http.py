"""The HTTP API's cost and speed (issue 11's benchmark).

1. Throughput: one mission of N trivial tasks (scripts/bench_throughput.py's), with ``[http]`` off, then on with a
   client (another process) following ``/api/events/stream`` for the whole run; runs alternate, medians printed.
   Goal: on within 10 % of off.
2. ``GET /api/missions/{id}`` of a finished 10 000-task mission, timed from a client on loopback: the first
   request (assembled from the store) and the median of the next ones (a finished mission's answer is kept until
   it changes); also the mission list and one task. Goal: median ≤ 200 ms.

Usage: .venv/bin/python scripts/bench_http.py [--sizes 1000] [--runs 3] [--big 10000] [--gets 20]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from bench_common import CONFIG, Run, run_mission, trivial_tasks, wait_for

HTTP = '\n[http]\nlisten = "127.0.0.1:0"\ntoken_env = "POLPO_BENCH_NO_TOKEN"\n'

FOLLOWER = """
import sys, httpx
n = 0
with httpx.stream("GET", sys.argv[1] + "/api/events/stream", timeout=None) as r:
    for line in r.iter_lines():
        if line.startswith("data: "):
            n += 1
            if '"event":"mission:completed"' in line:
                break
print(n, flush=True)
"""


@contextmanager
def daemon(http: bool, concurrency: int = 8) -> Iterator[tuple[Path, subprocess.Popen[str], str | None]]:
    root = Path(tempfile.mkdtemp(prefix="polpo-bench-http-"))
    (root / "missions").mkdir()
    (root / "polpo.toml").write_text(CONFIG.format(concurrency=concurrency) + (HTTP if http else ""))
    proc = subprocess.Popen([sys.executable, "-m", "polpo", "daemon", "--config", str(root / "polpo.toml")],
                            stdout=subprocess.DEVNULL, stderr=(root / "daemon.log").open("w"), text=True)
    try:
        wait_for(root, lambda e: e["event"] == "orchestrator:started", timeout=60)
        url = json.loads((root / "state" / "http.json").read_text())["url"] if http else None
        time.sleep(0.3)  # let the watcher settle in
        yield root, proc, url
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def throughput(n: int, http: bool) -> tuple[Run, int | None]:
    with daemon(http) as (root, proc, url):
        follower = None
        if url is not None:
            follower = subprocess.Popen([sys.executable, "-c", FOLLOWER, url], stdout=subprocess.PIPE, text=True)
            with httpx.Client() as c:  # the follower is connected before the mission is dropped
                while c.get(url + "/metrics").text.find("polpo_http_stream_clients 1.0") < 0:
                    time.sleep(0.05)
        run = run_mission(root, proc, f"n{n}", {"tasks": trivial_tasks(n)}, timeout=3600)
        seen = int(follower.communicate(timeout=120)[0]) if follower is not None else None
    assert run.report["tasks"]["done"] == n, run.report
    return run, seen


def gets(n: int, count: int) -> None:
    with daemon(True) as (root, proc, url):
        assert url is not None
        run_mission(root, proc, "big", {"tasks": trivial_tasks(n)}, timeout=3600)
        with httpx.Client(base_url=url, timeout=60) as c:
            for path in ("/api/missions/big", "/api/missions", f"/api/tasks/big:{n // 2}"):
                t0 = time.perf_counter()
                size = len(c.get(path).content)
                cold = (time.perf_counter() - t0) * 1000
                times = []
                for _ in range(count):
                    t0 = time.perf_counter()
                    r = c.get(path)
                    times.append((time.perf_counter() - t0) * 1000)
                    assert r.status_code == 200
                times.sort()
                print(f"GET {path:<22} ({size / 1024:7.0f} KiB): first {cold:6.1f} ms, then median "
                      f"{statistics.median(times):6.1f} ms, "
                      f"p90 {times[int(len(times) * 0.9) - 1]:6.1f} ms, max {times[-1]:6.1f} ms over {count}"
                      + ("  (goal ≤ 200 ms)" if path == "/api/missions/big" else ""), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="*", default=[1000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--big", type=int, default=10_000)
    ap.add_argument("--gets", type=int, default=20)
    args = ap.parse_args()
    for n in args.sizes:
        off: list[float] = []
        on: list[float] = []
        for _ in range(args.runs):
            for http, into in ((False, off), (True, on)):
                run, seen = throughput(n, http)
                into.append(run.ms_per_task)
                print(f"N={n} http={'on ' if http else 'off'}: wall {run.wall:6.2f} s, {run.ms_per_task:5.2f} ms/task, "
                      f"CPU {run.cpu_ms_per_task:5.2f} ms/task (own {run.self_cpu_ms_per_task:5.2f})"
                      + (f", follower saw {seen} events" if seen is not None else ""), flush=True)
        a, b = statistics.median(off), statistics.median(on)
        print(f"N={n}: median {a:.2f} ms/task off, {b:.2f} ms/task on with a stream follower: "
              f"{(b / a - 1) * 100:+.1f} % (goal within 10 %)", flush=True)
    if args.big:
        gets(args.big, args.gets)


if __name__ == "__main__":
    main()
