"""Wall time of quick CLI commands (they must not import litellm).

Usage: .venv/bin/python scripts/bench_cli.py [--runs 7]
Goal (issue 3): `polpo validate` of a valid file ≤ 0.5 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
POLPO = REPO / ".venv" / "bin" / "polpo"


def timed(args: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(args, cwd=REPO, check=True, capture_output=True)
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    cmd = [str(POLPO), "validate", "missions/calculator.json"]
    xs = timed(cmd, a.runs)
    print(f"polpo validate: median {statistics.median(xs):.3f} s (min {min(xs):.3f}, n={len(xs)}) goal ≤ 0.5 s")
    check = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-X", "importtime", "-m", "polpo",
                            "validate", "missions/hello.json"], cwd=REPO, capture_output=True, text=True)
    print("litellm imported by validate:", "litellm" in check.stderr)


if __name__ == "__main__":
    main()
