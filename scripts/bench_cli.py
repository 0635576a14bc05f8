"""Wall time of the quick CLI commands, on a state folder whose events.jsonl has ~100 000 lines.

Usage: .venv/bin/python scripts/bench_cli.py [--runs 7] [--state DIR] [--lines 100000] [--imports] [--no-compile]
The state folder is built by a real daemon running missions of 2 000 trivial tasks until the log has
--lines lines (about a minute); --state DIR keeps it in DIR and reuses it on the next run. The daemon is
stopped before the commands are timed. Each command runs --runs times; medians are reported.
Goal: ≤ 0.2 s each for `validate` (a small file), `status`, `show MISSION`, `show TASK` and `tail -n 20`;
`polpo --version` is shown as the start-up floor. Quick commands must not import litellm. --imports
adds, per command, the modules costing ≥ 15 ms to import (python -X importtime), parents first.
polpo's .pyc files are written first, as pip does when it installs polpo: a checkout run with
PYTHONDONTWRITEBYTECODE=1 would otherwise compile every module it imports on every command (~20 ms of
validate); --no-compile times that case instead. The load average is printed before and after, and each
command's median CPU time (user + system) next to its wall time: on a shared machine it moves less with the load.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_common import CONFIG, bench_daemon, run_mission, trivial_tasks, write_bytecode

REPO = Path(__file__).resolve().parents[1]
POLPO = REPO / ".venv" / "bin" / "polpo"
BATCH = 2000


def log_lines(root: Path) -> int:
    path = root / "state" / "events.jsonl"
    if not path.exists():
        return 0
    with path.open("rb") as f:
        return sum(1 for _ in f)


def build_state(root: Path | None, lines: int) -> Path:
    """A state folder with at least ``lines`` log lines and the missions ``m0``, ``m1``… (reused if there)."""
    if root is not None and log_lines(root) >= lines:
        return root
    with bench_daemon(keep=True) as (built, proc):
        k = 0
        while log_lines(built) < lines:
            run_mission(built, proc, f"m{k}", {"tasks": trivial_tasks(BATCH)}, timeout=3600)
            k += 1
    if root is None:
        return built
    root.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(root / "state", ignore_errors=True)
    shutil.move(built / "state", root / "state")
    shutil.rmtree(built)
    (root / "missions").mkdir(exist_ok=True)
    (root / "polpo.toml").write_text(CONFIG.format(concurrency=8))
    return root


def timed(args: list[str], runs: int) -> tuple[list[float], list[float]]:
    """Wall seconds and CPU seconds (user + system) of each run."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(args, cwd=REPO, check=True, capture_output=True)
        walls.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def import_tree(args: list[str], min_ms: float = 15, depth: int = 3) -> list[str]:
    """The modules a command imports costing ≥ ``min_ms`` (cumulative), parents first, from -X importtime."""
    err = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-X", "importtime", "-m", "polpo", *args],
                         cwd=REPO, capture_output=True, text=True).stderr
    out = []
    for ln in reversed(err.splitlines()):
        if not ln.startswith("import time:") or "imported package" in ln:
            continue
        _, cum, name = ln[len("import time:"):].split("|")
        level = (len(name) - len(name.lstrip()) - 1) // 2
        if level < depth and int(cum) >= 1000 * min_ms:
            out.append(f"{'  ' * level}{name.strip()} {int(cum) / 1000:.0f} ms")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--state", type=Path, help="keep the built state folder here and reuse it")
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--imports", action="store_true", help="also print what each command imports (≥ 15 ms)")
    ap.add_argument("--no-compile", action="store_true", help="do not write polpo's .pyc files first")
    a = ap.parse_args()
    root = build_state(a.state.resolve() if a.state else None, a.lines)
    cfg = ["--config", str(root / "polpo.toml")]
    if not a.no_compile:
        write_bytecode()
    bytecode = "without .pyc files unless Python writes them" if a.no_compile else "with .pyc files"
    print(f"state: {root} ({log_lines(root)} log lines); {a.runs} runs per command, {bytecode}; "
          f"load average {load()}")
    commands = {
        "--version (floor)": [str(POLPO), "--version"],
        "validate hello.json": [str(POLPO), "validate", "missions/hello.json"],
        "status": [str(POLPO), "status", *cfg],
        "show m0": [str(POLPO), "show", "m0", *cfg],
        "show m0:1": [str(POLPO), "show", "m0:1", *cfg],
        "tail -n 20": [str(POLPO), "tail", "-n", "20", *cfg],
    }
    for label, cmd in commands.items():
        xs, cpus = timed(cmd, a.runs)
        goal = "" if "floor" in label else "  goal ≤ 0.2 s"
        print(f"polpo {label:<20} median {statistics.median(xs):.3f} s (min {min(xs):.3f}, max {max(xs):.3f}; "
              f"CPU {statistics.median(cpus):.3f} s){goal}", flush=True)
        if a.imports:
            print("\n".join("    " + x for x in import_tree(cmd[1:])))
    check = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-X", "importtime", "-m", "polpo",
                            "validate", "missions/hello.json"], cwd=REPO, capture_output=True, text=True)
    print("litellm imported by validate:", "litellm" in check.stderr)
    print(f"load average {load()}")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
