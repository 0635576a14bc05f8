"""The floor: the least a program must do to run N trivial tasks the way the daemon does.

Usage: .venv/bin/python scripts/bench_floor.py [--sizes 1000] [--runs 3] [--compare] [--devnull]
Per task, at concurrency 8 (the throughput bench's): spawn the trivial agent command (`true`) in its own
process group (start_new_session) with pipes for stdin/stdout/stderr (--devnull: none), feed it a small
JSON document and wait for it; stat the workspace before and after (os.scandir); a single writer commits the finished tasks
in one SQLite (WAL, synchronous=NORMAL) transaction per batch. No log, no validation, no state machine.
Reports wall, ms/task and CPU ms/task (user+sys of this process and its reaped children, from
resource.getrusage; `own` is this process alone). With --compare, also runs bench_throughput's polpo
measurement for the same N (runs alternate with the floor's) and prints polpo/floor for wall, CPU and own CPU (the agents' own CPU is the
same on both sides). Goal: polpo ≤ 2× the floor at 1 000 tasks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_common import TRIVIAL_COMMAND, median
from bench_throughput import line, measure_polpo

CONCURRENCY = 8


@dataclass
class FloorRun:
    tasks: int
    wall: float
    cpu_self: float  # seconds, user+sys of this process
    cpu_children: float  # seconds, user+sys of its reaped children

    @property
    def ms_per_task(self) -> float:
        return 1000 * self.wall / self.tasks

    @property
    def cpu_ms_per_task(self) -> float:
        return 1000 * (self.cpu_self + self.cpu_children) / self.tasks

    @property
    def self_cpu_ms_per_task(self) -> float:
        return 1000 * self.cpu_self / self.tasks


def stat_workspace(path: Path) -> dict[str, tuple[int, int]]:
    with os.scandir(path) as it:
        return {e.name: (s.st_size, s.st_mtime_ns) for e in it if (s := e.stat(follow_symlinks=False))}


async def run_floor(n: int, root: Path, pipes: bool = True) -> None:
    workspace = root / "ws"
    workspace.mkdir()
    db = sqlite3.connect(root / "floor.db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE tasks (id TEXT PRIMARY KEY, exit_code INTEGER, files INTEGER)")
    finished: list[tuple[str, int | None, int]] = []
    wake = asyncio.Event()
    todo = iter(range(n))
    env = dict(os.environ)
    stdio = asyncio.subprocess.PIPE if pipes else asyncio.subprocess.DEVNULL

    async def worker() -> None:
        for i in todo:
            before = stat_workspace(workspace)
            proc = await asyncio.create_subprocess_exec(
                *TRIVIAL_COMMAND, cwd=workspace, env=env, start_new_session=True,
                stdin=stdio, stdout=stdio, stderr=stdio)
            await proc.communicate(json.dumps({"taskId": f"floor:{i}", "title": f"t{i}"}).encode() if pipes else None)
            after = stat_workspace(workspace)
            finished.append((f"floor:{i}", proc.returncode, len(after.keys() ^ before.keys())))
            wake.set()

    async def writer(done: asyncio.Event) -> None:
        while not (done.is_set() and not finished):
            await wake.wait()
            wake.clear()
            batch = finished[:]
            finished.clear()
            if batch:
                db.execute("BEGIN IMMEDIATE")
                db.executemany("INSERT INTO tasks VALUES (?, ?, ?)", batch)
                db.execute("COMMIT")

    done = asyncio.Event()
    write = asyncio.create_task(writer(done))
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    done.set()
    wake.set()
    await write
    (count,) = db.execute("SELECT COUNT(*) FROM tasks").fetchone()
    db.close()
    assert count == n, count


def measure_floor(n: int, pipes: bool = True) -> FloorRun:
    def cpu(who: int) -> float:
        ru = resource.getrusage(who)
        return ru.ru_utime + ru.ru_stime

    root = Path(tempfile.mkdtemp(prefix="polpo-floor-"))
    own0, kids0, t0 = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
    asyncio.run(run_floor(n, root, pipes))
    wall = time.perf_counter() - t0
    shutil.rmtree(root)
    return FloorRun(n, wall, cpu(resource.RUSAGE_SELF) - own0, cpu(resource.RUSAGE_CHILDREN) - kids0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000])
    ap.add_argument("--runs", type=int, default=3, help="runs per size (medians are reported)")
    ap.add_argument("--compare", action="store_true", help="also measure polpo and print polpo/floor")
    ap.add_argument("--devnull", action="store_true",
                    help="no pipes (stdio on /dev/null): the bare spawn, below what the daemon must do")
    args = ap.parse_args()
    for n in args.sizes:
        # with --compare the runs alternate (floor, polpo, floor, …) so a change of load on the machine hits both
        floors: list[FloorRun] = []
        polpos = []
        for _ in range(args.runs):
            floors.append(measure_floor(n, not args.devnull))
            if args.compare:
                polpos.append(measure_polpo(n, CONCURRENCY))
                print("polpo " + line(polpos[-1]), flush=True)
        f_wall = median([f.ms_per_task for f in floors])
        f_cpu = median([f.cpu_ms_per_task for f in floors])
        f_own = median([f.self_cpu_ms_per_task for f in floors])
        print(f"floor N={n:>6}: {f_wall:6.2f} ms/task, CPU {f_cpu:5.2f} ms/task (own {f_own:5.2f}) "
              f"(median of {args.runs}; wall {median([f.wall for f in floors]):.2f} s)", flush=True)
        if not args.compare:
            continue
        p_wall = median([r.ms_per_task for r in polpos])
        p_cpu = median([r.cpu_ms_per_task for r in polpos])
        p_own = median([r.self_cpu_ms_per_task for r in polpos])
        pairs = sorted(p.ms_per_task / f.ms_per_task for p, f in zip(polpos, floors, strict=True))
        print(f"polpo/floor N={n}: wall {p_wall / f_wall:.2f}x, CPU {p_cpu / f_cpu:.2f}x, own CPU {p_own / f_own:.2f}x "
              f"(medians of {args.runs}; goal ≤ 2x); wall ratio of each pair of runs: "
              f"{', '.join(f'{r:.2f}' for r in pairs)}", flush=True)

if __name__ == "__main__":
    main()
