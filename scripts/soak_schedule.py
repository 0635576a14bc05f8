"""A schedule firing every second for a long time, with the daemon killed (SIGKILL) and restarted at random.

Usage: .venv/bin/python scripts/soak_schedule.py [--minutes 60] [--kill 120 600] [--finished PT10M]
                                                 [--schedule-runs 300] [--interval 60] [--seed 1] [--out FILE]

One scheduled mission (``"schedule": "PT1S"``, three ``noop`` tasks) on a fresh SQLite state, ``[retention]
finished = --finished``, ``schedule_runs = --schedule-runs``, passes every ``--interval`` seconds. The daemon is
killed with SIGKILL at random moments (a gap drawn uniformly from ``--kill`` seconds) and started again at once;
every 10 s its RSS, the missions kept in the store, the database's size and the runs started so far are sampled
(``--out``: the samples as CSV). At the end it says, per life of the daemon, the RSS after its first minute (min,
median, max, and the slope of a least-squares line in MB per hour), and checks what the retention kept and that
no scheduled instant ran twice (``schedule:triggered`` in events.jsonl, which nothing prunes).

Goal (issue 31): RSS flat over the hour (no growth with the runs), the store's missions bounded by the retention.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import CONFIG as BENCH_CONFIG

CONFIG = BENCH_CONFIG.format(concurrency=4).replace("{", "{{").replace("}", "}}") + """
[retention]
finished = "{finished}"
schedule_runs = {runs}
interval = {interval}
"""

MISSION = {"name": "every second", "schedule": "PT1S", "tasks": [
    {"title": "a", "description": "a", "assignTo": "noop"},
    {"title": "b", "description": "b", "assignTo": "noop", "dependsOn": ["a"]},
    {"title": "c", "description": "c", "assignTo": "noop"}]}


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def store_facts(db: Path) -> tuple[int, float]:
    """(missions kept, database size in MB)."""
    size = sum(p.stat().st_size for p in db.parent.glob(db.name + "*")) / 2**20
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return int(con.execute("SELECT COUNT(*) FROM missions").fetchone()[0]), size
        finally:
            con.close()
    except sqlite3.Error:
        return -1, size


def start(root: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "polpo", "daemon", "--config", str(root / "polpo.toml")],
                            stdout=subprocess.DEVNULL, stderr=(root / "daemon.log").open("ab"))


def triggered(root: Path) -> list[str]:
    out = []
    with open(root / "state" / "events.jsonl", "rb") as f:
        for line in f:
            if b'"schedule:triggered"' in line:
                out.append(json.loads(line)["data"]["scheduledFor"])
    return out


def slope(points: list[tuple[float, float]]) -> float:
    """MB per hour of a least-squares line through (seconds, MB)."""
    if len(points) < 3:
        return float("nan")
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 3600 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--kill", type=float, nargs=2, default=[120, 600], metavar=("MIN", "MAX"))
    ap.add_argument("--finished", default="PT10M")
    ap.add_argument("--schedule-runs", type=int, default=300)
    ap.add_argument("--interval", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--keep", action="store_true", help="leave the state folder (its path is printed)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="polpo-soak-"))
    (root / "missions").mkdir()
    (root / "polpo.toml").write_text(CONFIG.format(finished=args.finished, runs=args.schedule_runs,
                                                   interval=args.interval))
    (root / "missions" / "every-second.json").write_text(json.dumps(MISSION))
    db = root / "state" / "polpo.db"
    samples: list[dict[str, Any]] = []
    t0 = time.monotonic()
    end = t0 + 60 * args.minutes
    proc = start(root)
    life, born = 1, time.monotonic()
    next_kill = time.monotonic() + rng.uniform(*args.kill)
    next_sample = time.monotonic() + 10
    print(f"state {root}; load average {os.getloadavg()[0]:.2f}", flush=True)
    try:
        while time.monotonic() < end:
            time.sleep(0.5)
            now = time.monotonic()
            if now >= next_kill:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                proc = start(root)
                life, born = life + 1, now
                next_kill = now + rng.uniform(*args.kill)
            if now >= next_sample:
                next_sample = now + 10
                kept, size = store_facts(db) if db.exists() else (0, 0.0)
                row = {"t": round(now - t0, 1), "life": life, "age": round(now - born, 1), "pid": proc.pid,
                       "rss_mb": rss_mb(proc.pid), "missions_kept": kept, "db_mb": round(size, 2)}
                samples.append(row)
                print(json.dumps(row), flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    if args.out is not None:
        with open(args.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(samples[0]))
            w.writeheader()
            w.writerows(samples)
    fired = triggered(root)
    print(f"lives {life}; runs started {len(fired)}; scheduled instants run twice: {len(fired) - len(set(fired))}")
    for n in range(1, life + 1):
        pts = [(s["t"], s["rss_mb"]) for s in samples if s["life"] == n and s["age"] >= 60 and s["rss_mb"]]
        if pts:
            ys = [y for _, y in pts]
            print(f"life {n}: {len(pts)} samples after its first minute: RSS min {min(ys):.1f} median "
                  f"{statistics.median(ys):.1f} max {max(ys):.1f} MB, slope {slope(pts):+.1f} MB/h")
    late = [s["rss_mb"] for s in samples if s["age"] >= 60 and s["rss_mb"]]
    if late:
        print(f"all lives after their first minute: RSS {min(late):.1f}–{max(late):.1f} MB; missions kept "
              f"{max(s['missions_kept'] for s in samples)} at most (schedule_runs {args.schedule_runs}); "
              f"database {samples[-1]['db_mb']} MB at the end")
    if args.keep:
        print(f"state left in {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
