"""What a budget adds to each LLM call, alone: a turn meter's admit + record, on a real store, without the call.

Usage: .venv/bin/python scripts/bench_budget_hold.py [--store sqlite|postgres] [--calls 500] [--tree REPO]

Each call is admitted under a task, a mission and a daily budget (so its estimate is held in the store first: one
commit before the call) and recorded right after (its settlement, submitted). The call is stood in for by waiting,
untimed, until the writer has committed what was submitted, then a millisecond: a real call lasts long enough for
that (with a bare 1 ms sleep, a hold queued behind the previous call's settlement, and both were timed). Prints the
median and p90 of admit + record in ms (the first 10% of calls are a warm-up). The same loop runs on a tree whose
``admit`` is not awaitable (before the holds), for an A/B: the difference is the hold's commit. ``--tree REPO``
measures that checkout's polpo with this script (run the two trees interleaved, several times each, and compare
medians; say whether the machine was loaded).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TREE = sys.argv[sys.argv.index("--tree") + 1] if "--tree" in sys.argv[:-1] else None
ROOT = Path(TREE).resolve() if TREE else Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anyio

import polpo
from polpo.clock import FakeClock
from polpo.config import Config, StoreSettings
from polpo.engine.spend_book import SpendBook
from polpo.mission.schema import MissionSpec
from polpo.store.postgres import PostgresStore
from polpo.store.sqlite import SqliteStore
from tests.support.postgres import running_cluster
from tests.support.stores import writing

SPEC = MissionSpec.model_validate({"settings": {"budget": {"usd": 1e5, "tokens": 10**11}}, "tasks": [
    {"title": "t", "description": "d", "budget": {"usd": 1e5, "tokens": 10**11}}]})


async def measure(kind: str, calls: int) -> list[float]:
    clock = FakeClock()
    with contextlib.ExitStack() as stack:
        if kind == "postgres":
            pg = stack.enter_context(running_cluster())
            store: Any = await PostgresStore.open(StoreSettings(url=pg.url(pg.create_database("hold"))),
                                                     clock=clock)
        else:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="polpo-bench-hold-")))
            store = await SqliteStore.open(tmp / "polpo.db", clock=clock)
        async with writing(store):
            book = SpendBook(Config.model_validate({"budget": {"daily_tokens": 10**11}}), store, clock)
            meter = book.meter("m:1", "m", "coder", SPEC.tasks[0], SPEC)
            times = []
            for _ in range(calls):
                t0 = time.perf_counter()
                ticket: Any = meter.admit("openai/gpt-4o", lambda: (1000, 500))
                if inspect.isawaitable(ticket):
                    ticket = await ticket
                meter.record(ticket, "openai/gpt-4o", 900, 100, 0.003)
                times.append((time.perf_counter() - t0) * 1000)
                await store.flush()  # the call (untimed): the writer commits what was submitted meanwhile
                await anyio.sleep(0.001)
    return times[calls // 10:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose polpo is measured (default: this one)")
    args = ap.parse_args()
    times = sorted(anyio.run(measure, args.store, args.calls))
    med, p90 = statistics.median(times), times[int(len(times) * 0.9)]
    print(f"{args.store}: admit + record per call: median {med:.3f} ms, p90 {p90:.3f} ms ({len(times)} calls)")
    print(json.dumps({"bench": "budget_hold", "tree": str(Path(polpo.__file__).parent.parent), "store": args.store, "calls": len(times),
                      "median_ms": round(med, 4), "p90_ms": round(p90, 4)}))


if __name__ == "__main__":
    main()
