"""What an idle daemon costs: CPU and wake-ups per second, per thread, with nothing to do.

Usage: .venv/bin/python scripts/bench_idle.py [--seconds 20] [--runs 3]

A daemon that runs for a year is idle most of the time; what it does then is paid every second of it (power,
a shared machine's CPU, a laptop's battery). One daemon on a temp folder (SQLite, one command agent), left
alone after start-up; its CPU (user + system) and its context switches (voluntary + involuntary: each is a
wake-up) are read from /proc before and after, for the process, its main thread and its other threads. Reports
the median over ``--runs`` windows. Before the missions folder was watched with inotify, watchfiles' thread
woke every 5 ms (200 times a second), taking the GIL each time; before the command inbox's poll was read on the
loop, it woke aiosqlite's thread three times every 250 ms (65 wake-ups a second in all; 6 after).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_common import bench_daemon

TICK = os.sysconf("SC_CLK_TCK")


def threads(pid: int) -> dict[str, tuple[float, int]]:
    """(CPU seconds, context switches) of the main thread and of the others (worker threads come and go)."""
    out: dict[str, tuple[float, int]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
        name = "main thread" if int(tid) == pid else "other threads"
        fields = stat[stat.rindex(")") + 2:].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICK
        switches = sum(int(line.split()[1]) for line in status.splitlines() if "ctxt_switches" in line)
        prev = out.get(name, (0.0, 0))
        out[name] = (prev[0] + cpu, prev[1] + switches)
    return out


def window(pid: int, seconds: float) -> dict[str, tuple[float, float]]:
    """Per thread name: (ms of CPU per second, wake-ups per second) over ``seconds``; "(all)" for the process."""
    a = threads(pid)
    time.sleep(seconds)
    b = threads(pid)
    rates = {name: ((cpu - a.get(name, (0.0, 0))[0]) * 1000 / seconds, (sw - a.get(name, (0.0, 0))[1]) / seconds)
             for name, (cpu, sw) in b.items()}
    rates["(all)"] = (sum(r[0] for r in rates.values()), sum(r[1] for r in rates.values()))
    return rates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="length of one window (default 20)")
    ap.add_argument("--runs", type=int, default=3, help="windows measured (default 3)")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds left alone after start-up (default 5)")
    args = ap.parse_args()
    with bench_daemon() as (_root, proc):
        time.sleep(args.settle)
        runs = [window(proc.pid, args.seconds) for _ in range(args.runs)]
    names = sorted({n for r in runs for n in r}, key=lambda n: (n != "(all)", n))
    med = {n: (statistics.median(r.get(n, (0.0, 0.0))[0] for r in runs),
               statistics.median(r.get(n, (0.0, 0.0))[1] for r in runs)) for n in names}
    print(f"idle daemon, {args.runs} windows of {args.seconds:g} s (medians)")
    print(f"{'thread':<20} {'CPU ms/s':>9} {'wake-ups/s':>11}")
    for n in names:
        print(f"{n:<20} {med[n][0]:>9.2f} {med[n][1]:>11.1f}")
    print(json.dumps({"bench": "idle", "seconds": args.seconds, "runs": args.runs,
                      "cpu_ms_per_s": round(med["(all)"][0], 3), "wakeups_per_s": round(med["(all)"][1], 1),
                      "threads": {n: {"cpu_ms_per_s": round(c, 3), "wakeups_per_s": round(w, 1)}
                                  for n, (c, w) in med.items() if n != "(all)"}}))


if __name__ == "__main__":
    main()
