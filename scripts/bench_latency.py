"""Drop → mission:completed latency: a 1-task mission and a 10-task dependency chain, by three ways in.

Usage: .venv/bin/python scripts/bench_latency.py [--runs 20] [--via submit cp http]
- ``submit``: ``polpo submit``'s own write (a dot-named temp file, fsync, rename into the folder, fsync of the
  folder; the clock starts before it: the CLI's start-up and validation are not counted);
- ``cp``: written in place, as ``cp`` does (create, write, close);
- ``http``: ``POST /api/missions`` (the clock starts at the request).
Goals (issue 22): ≤ 25 ms for one task and ≤ 60 ms for the 10-task chain (medians). Temporal's dev server, one
activity running ``true``: 27 ms and 137 ms.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from bench_common import bench_daemon, median, ts, wait_for

from polpo.cli.missions import _write_atomically


def task(i: int, deps: list[str]) -> dict[str, Any]:
    return {"title": f"t{i}", "description": "noop", "assignTo": "noop", "dependsOn": deps,
            "expectations": [{"type": "file_exists", "path": "."}]}


def submit(root: Path, name: str, doc: dict[str, Any]) -> float:
    """As ``polpo submit`` writes a mission into the folder."""
    data = json.dumps(doc).encode()
    t = time.time()
    _write_atomically(root / "missions", name, data)
    return t


def copy_in(root: Path, name: str, doc: dict[str, Any]) -> float:
    """As ``cp`` writes a file: created in place, written, closed."""
    data = json.dumps(doc).encode()
    t = time.time()
    with open(root / "missions" / name, "wb") as f:
        f.write(data)
    return t


_client: httpx.Client | None = None  # one keep-alive connection, as a client that submits often keeps


def via_http(root: Path, name: str, doc: dict[str, Any]) -> float:
    global _client
    if _client is None:
        _client = httpx.Client(base_url=json.loads((root / "state" / "http.json").read_text())["url"], timeout=30,
                               headers={"Content-Type": "application/json"})
    body = json.dumps(doc)
    t = time.time()
    _client.post(f"/api/missions?name={name}", content=body).raise_for_status()
    return t


WAYS: dict[str, Callable[[Path, str, dict[str, Any]], float]] = {"submit": submit, "cp": copy_in, "http": via_http}


def measure(root: Path, way: str, runs: int, tasks: list[dict[str, Any]]) -> list[float]:
    out = []
    for r in range(runs + 1):  # the first is a warm-up (imports, first connection)
        mid = f"{way}-{len(tasks)}-{r}"
        t0 = WAYS[way](root, f"{mid}.json", {"tasks": tasks})
        ev = wait_for(root, lambda e, mid=mid: e["event"] == "mission:completed" and e["missionId"] == mid)
        if r:
            out.append(ts(ev) - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--via", nargs="+", choices=sorted(WAYS), default=["submit", "cp", "http"])
    args = ap.parse_args()
    one = [task(0, [])]
    chain = [task(i, [f"t{i - 1}"] if i else []) for i in range(10)]
    with bench_daemon(concurrency=8, extra='\n[http]\nlisten = "127.0.0.1:0"\n') as (root, _):
        for way in args.via:
            for label, tasks, goal in (("1 task", one, 25), ("10-task chain", chain, 60)):
                xs = measure(root, way, args.runs, tasks)
                print(f"{way:<7} {label:<14} median {median(xs) * 1000:6.1f} ms  (min {min(xs) * 1000:.1f}, "
                      f"max {max(xs) * 1000:.1f}, n={len(xs)})  goal ≤ {goal} ms", flush=True)


if __name__ == "__main__":
    main()
