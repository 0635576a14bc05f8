"""The nemesis from the command line: real daemons, faults on a schedule drawn from each seed, invariants checked.

    .venv/bin/python scripts/nemesis.py --seed 17              # one seed, its plan and timeline as it runs
    .venv/bin/python scripts/nemesis.py --seeds 200            # seeds 0..199 (--from N to start elsewhere)
    .venv/bin/python scripts/nemesis.py --for 2h               # seeds from --from on, until two hours have passed
    .venv/bin/python scripts/nemesis.py --seeds 50 --topology pg3 --faults guard-then-daemon,blackhole

Each seed prints its plan (topology, missions, faults and their times), its timeline (what each step found and
did, every daemon's start and end) and its verdict; ``--quiet`` prints the verdict lines only. A seed that breaks
an invariant keeps its folder (ledger, configs, every node's state and output) and says how to rerun it; the
same seed is the same schedule. The run ends with a summary and exits 1 if any seed broke an invariant (2 if
none did but a seed's run could not be done: a node that never started, say).
PostgreSQL topologies run on one private server started here (tests/support/postgres.py), which the faults stop
and kill; disk faults need root (a tmpfs per node's state folder), and are skipped with a note otherwise.
See docs/nemesis.md.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.nemesis.plan import FAULTS, TOPOLOGIES, make_plan
from tests.nemesis.run import run_plan
from tests.support.postgres import PgCluster, start_cluster


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--seed", type=int, help="run this one seed")
    which.add_argument("--seeds", type=int, help="run this many seeds, from --from on")
    which.add_argument("--for", dest="for_", help="run seeds from --from on for this long (90s, 30m, 2h)")
    ap.add_argument("--from", dest="first", type=int, default=0, help="the first seed (default 0)")
    ap.add_argument("--topology", choices=sorted(TOPOLOGIES), help="only this topology (the seed draws the rest)")
    ap.add_argument("--faults", help=f"only these fault kinds, comma-separated: {', '.join(FAULTS)}")
    ap.add_argument("--keep", action="store_true", help="keep every seed's folder, not only the broken ones'")
    ap.add_argument("--quiet", action="store_true", help="print each seed's verdict only")
    ap.add_argument("--python", help="the Python whose polpo the daemons run (another checkout's venv: try a seed "
                                     "on the code before a fix); default this one")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, _interrupted)  # a stopped soak stops its daemons and servers on the way out
    kinds = tuple(k.strip() for k in args.faults.split(",")) if args.faults else None
    if kinds is not None and (unknown := [k for k in kinds if k not in FAULTS]):
        ap.error(f"unknown fault kind(s) {', '.join(unknown)}; known: {', '.join(FAULTS)}")
    until = None if args.for_ is None else time.monotonic() + _seconds(args.for_, ap)
    pg: PgCluster | None = None
    broke: list[int] = []
    failed: list[int] = []  # seeds whose run could not be done (not a verdict)
    count = 0
    started = time.monotonic()
    seed = args.seed if args.seed is not None else args.first
    try:
        while True:
            plan = make_plan(seed, topology=args.topology, kinds=kinds)
            if plan.postgres and pg is None:
                pg = start_cluster(durable=True)  # its faults kill the server: no acknowledged commit may be lost
            count += 1
            try:
                result = run_plan(plan, pg, out=(lambda _line: None) if args.quiet else print, keep=args.keep,
                                  python=args.python)
            except Exception as e:  # the run itself failed (a node never started, the machine is out of room…)
                print(f"seed {seed}: could not be run: {type(e).__name__}: {e}", flush=True)
                failed.append(seed)
            else:
                if args.quiet:
                    print("\n".join(result.verdict()), flush=True)
                if not result.ok:
                    broke.append(seed)
            seed += 1
            if args.seed is not None or (args.seeds is not None and count >= args.seeds) or \
                    (until is not None and time.monotonic() >= until):
                break
    finally:
        if pg is not None:
            pg.stop()
    print(f"nemesis: {count} seed(s) in {time.monotonic() - started:.0f} s; "
          + (f"{len(broke)} broke an invariant: {' '.join(map(str, broke))}" if broke else "none broke an invariant")
          + (f"; {len(failed)} could not be run: {' '.join(map(str, failed))}" if failed else ""))
    return 1 if broke else 2 if failed else 0


def _interrupted(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _seconds(text: str, ap: argparse.ArgumentParser) -> float:
    """``90s``, ``30m``, ``2h`` (or plain seconds)."""
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        return float(text[:-1]) * units[text[-1]] if text[-1:] in units else float(text)
    except ValueError:
        ap.error(f"--for {text}: give a duration such as 90s, 30m or 2h")


if __name__ == "__main__":
    sys.exit(main())
