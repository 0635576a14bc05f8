"""psycopg 3 (async + psycopg_pool) against asyncpg on the operations a PostgreSQL store would do.

Usage: .venv/bin/python scripts/bench_pg_driver.py [--ops 1000] [--rounds 3] [--json out.json]
Needs both drivers: .venv/bin/pip install "psycopg[binary,pool]" asyncpg   (only one is in the lock)

Starts a private PostgreSQL cluster (tests/support/postgres.py, fsync off) and, per driver variant and round,
on a fresh database, measures over TCP on 127.0.0.1:

- group commit: one transaction holding 20 task upserts (INSERT … ON CONFLICT DO UPDATE, 200 distinct ids so
  most are updates) and 15 event inserts, both sent with executemany; connection taken from a pool each time;
- claim: 3 concurrent connections each claim one ready row at a time with a single atomic statement
  ``UPDATE … WHERE id = (SELECT id … FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING …`` until none is left
  (3 × ops rows; the bench checks no row is claimed twice);
- wake-up: a pooled connection runs ``SELECT pg_notify(…)``; the time until the listener on a dedicated
  connection has the payload in hand (one at a time).

Variants: ``psycopg`` (executemany, which pipelines each call on its own), ``psycopg+pipeline`` (the whole
transaction in one explicit pipeline), ``asyncpg`` (defaults: the pool runs a reset query on every release),
``asyncpg-noreset`` (the pool's reset replaced by a no-op, as a store that never leaves session state could).
Client and server share the machine's cores, so the client's CPU cost per operation shows in the latency; it is
also printed on its own (``cpu µs/op``: this process's CPU time per operation, median of the rounds), since on
a busy daemon that, more than the latency, is what a driver costs.
Also prints each driver's import time (fresh interpreter with asyncio loaded, best of 5) and installed size.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import asyncpg
import psycopg
import psycopg_pool

from tests.support.postgres import running_cluster

UPSERTS, EVENTS, WORKERS, TASK_IDS = 20, 15, 3, 200
SCHEMA = [
    """CREATE TABLE tasks (
        id text PRIMARY KEY, mission_id text NOT NULL, status text NOT NULL, attempts integer NOT NULL,
        feedback text, updated_at timestamptz NOT NULL)""",
    """CREATE TABLE events (
        seq bigint PRIMARY KEY, ts timestamptz NOT NULL, event text NOT NULL, mission_id text,
        task_id text, data jsonb NOT NULL)""",
    """CREATE TABLE queue (
        id bigserial PRIMARY KEY, status text NOT NULL, owner text, lease_until timestamptz, payload text)""",
    "CREATE INDEX queue_ready ON queue (id) WHERE status = 'ready'",
]
UPSERT = (
    "INSERT INTO tasks (id, mission_id, status, attempts, feedback, updated_at) VALUES ({}, {}, {}, {}, {}, now()) "
    "ON CONFLICT (id) DO UPDATE SET status = excluded.status, attempts = excluded.attempts, "
    "feedback = excluded.feedback, updated_at = excluded.updated_at"
)
EVENT = "INSERT INTO events (seq, ts, event, mission_id, task_id, data) VALUES ({}, now(), {}, {}, {}, {})"
CLAIM = (
    "UPDATE queue SET status = 'running', owner = {}, lease_until = now() + interval '30 seconds' "
    "WHERE id = (SELECT id FROM queue WHERE status = 'ready' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) "
    "RETURNING id"
)
FILL = "INSERT INTO queue (status, payload) SELECT 'ready', 'task ' || g FROM generate_series(1, {}) g"


def _sql(template: str, style: str) -> str:
    n = template.count("{}")
    marks = ["%s"] * n if style == "psycopg" else [f"${i + 1}" for i in range(n)]
    return template.format(*marks)


def batch(k: int) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    tasks = [(f"t{(k * UPSERTS + i) % TASK_IDS}", "m1", "running", k, f"feedback {k}") for i in range(UPSERTS)]
    events = [(k * EVENTS + i, "task:transition", "m1", f"t{i}", json.dumps({"k": k, "i": i}))
              for i in range(EVENTS)]
    return tasks, events


class Variant:
    """One driver set-up: a pool for the store's work and a dedicated connection for LISTEN."""

    name = ""

    def __init__(self) -> None:
        self.url = ""

    async def open(self, url: str) -> None: ...
    async def close(self) -> None: ...
    async def setup(self, statements: list[str]) -> None: ...
    async def group_commit(self, k: int) -> None: ...
    async def claim_worker(self, owner: str, out: list[tuple[int, float]]) -> None: ...
    async def listen(self, channel: str, on_payload: Callable[[str], None]) -> None: ...
    async def unlisten(self) -> None: ...
    async def notify(self, channel: str, payload: str) -> None: ...


class Psycopg(Variant):
    name = "psycopg"
    pipeline = False

    async def open(self, url: str) -> None:
        self.url = url
        self.pump: asyncio.Task[None] | None = None
        self.listener: psycopg.AsyncConnection[Any] | None = None
        self.pool = psycopg_pool.AsyncConnectionPool(
            url, min_size=WORKERS + 1, max_size=WORKERS + 1, kwargs={"autocommit": True}, open=False)
        await self.pool.open(wait=True)
        self.upsert, self.event, self.claim = (_sql(s, "psycopg") for s in (UPSERT, EVENT, CLAIM))

    async def close(self) -> None:
        await self.unlisten()
        await self.pool.close()

    async def setup(self, statements: list[str]) -> None:
        async with self.pool.connection() as conn:
            for s in statements:
                await conn.execute(s.encode())  # bytes: a literal SQL string, no placeholders

    async def group_commit(self, k: int) -> None:
        tasks, events = batch(k)
        async with self.pool.connection() as conn:
            if self.pipeline:
                async with conn.pipeline(), conn.transaction(), conn.cursor() as cur:
                    await cur.executemany(self.upsert, tasks)
                    await cur.executemany(self.event, events)
            else:
                async with conn.transaction(), conn.cursor() as cur:
                    await cur.executemany(self.upsert, tasks)
                    await cur.executemany(self.event, events)

    async def claim_worker(self, owner: str, out: list[tuple[int, float]]) -> None:
        async with self.pool.connection() as conn:
            while True:
                t0 = time.perf_counter()
                row = await (await conn.execute(self.claim, (owner,))).fetchone()
                if row is None:
                    return
                out.append((row[0], time.perf_counter() - t0))

    async def listen(self, channel: str, on_payload: Callable[[str], None]) -> None:
        listener = self.listener = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        await listener.execute(f"LISTEN {channel}".encode())

        async def pump() -> None:
            async for n in listener.notifies():  # holds the connection's lock: nothing else can use it
                on_payload(n.payload)

        self.pump = asyncio.create_task(pump())

    async def unlisten(self) -> None:
        if self.pump is not None:
            self.pump.cancel()
            await asyncio.gather(self.pump, return_exceptions=True)
            self.pump = None
        if self.listener is not None:
            await self.listener.close()
            self.listener = None

    async def notify(self, channel: str, payload: str) -> None:
        async with self.pool.connection() as conn:
            await conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))


class PsycopgPipeline(Psycopg):
    name = "psycopg+pipeline"
    pipeline = True


class Asyncpg(Variant):
    name = "asyncpg"
    reset = True

    async def open(self, url: str) -> None:
        async def no_reset(_conn: asyncpg.Connection) -> None:
            return None

        self.url = url
        self.listener: asyncpg.Connection | None = None
        kwargs: dict[str, Any] = {} if self.reset else {"reset": no_reset}
        self.pool = await asyncpg.create_pool(url, min_size=WORKERS + 1, max_size=WORKERS + 1, **kwargs)
        self.upsert, self.event, self.claim = (_sql(s, "asyncpg") for s in (UPSERT, EVENT, CLAIM))

    async def close(self) -> None:
        await self.unlisten()
        await self.pool.close()

    async def setup(self, statements: list[str]) -> None:
        async with self.pool.acquire() as conn:
            for s in statements:
                await conn.execute(s)

    async def group_commit(self, k: int) -> None:
        tasks, events = batch(k)
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.executemany(self.upsert, tasks)
            await conn.executemany(self.event, events)

    async def claim_worker(self, owner: str, out: list[tuple[int, float]]) -> None:
        async with self.pool.acquire() as conn:
            while True:
                t0 = time.perf_counter()
                row = await conn.fetchrow(self.claim, owner)
                if row is None:
                    return
                out.append((row[0], time.perf_counter() - t0))

    async def listen(self, channel: str, on_payload: Callable[[str], None]) -> None:
        # a dedicated connection: a pooled one loses its listeners (and runs UNLISTEN *) on release
        self.listener = await asyncpg.connect(self.url)
        await self.listener.add_listener(channel, lambda _c, _pid, _ch, payload: on_payload(payload))

    async def unlisten(self) -> None:
        if self.listener is not None:
            await self.listener.close()
            self.listener = None

    async def notify(self, channel: str, payload: str) -> None:
        async with self.pool.acquire() as conn:
            await conn.execute("SELECT pg_notify($1, $2)", channel, payload)


class AsyncpgNoReset(Asyncpg):
    name = "asyncpg-noreset"
    reset = False


VARIANTS: list[type[Variant]] = [Psycopg, PsycopgPipeline, Asyncpg, AsyncpgNoReset]


async def timed(n: int, op: Callable[[int], Awaitable[None]], cpu: list[float], warmup: int = 50) -> list[float]:
    """Latency of each of `n` sequential calls; appends this process's CPU seconds per call to `cpu`."""
    for k in range(warmup):
        await op(-1 - k)
    out = []
    c0 = time.process_time()
    for k in range(n):
        t0 = time.perf_counter()
        await op(k)
        out.append(time.perf_counter() - t0)
    cpu.append((time.process_time() - c0) / n)
    return out


async def run_variant(v: Variant, url: str, ops: int) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Latencies per operation, and the client's CPU seconds per operation."""
    await v.open(url)
    try:
        await v.setup(SCHEMA)
        cpu: dict[str, list[float]] = {"group_commit": [], "claim": [], "wake": []}
        commit = await timed(ops, v.group_commit, cpu["group_commit"])

        await v.setup([FILL.format(WORKERS * ops)])
        claims: list[tuple[int, float]] = []
        t0, c0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(v.claim_worker(f"w{i}", claims) for i in range(WORKERS)))
        claim_wall = time.perf_counter() - t0
        cpu["claim"].append((time.process_time() - c0) / len(claims))
        ids = [c[0] for c in claims]
        assert len(ids) == len(set(ids)) == WORKERS * ops, "a row was claimed twice or lost"

        loop = asyncio.get_running_loop()
        waiting: dict[str, asyncio.Future[None]] = {}

        def woke(payload: str) -> None:
            f = waiting.pop(payload, None)
            if f is not None and not f.done():
                f.set_result(None)

        await v.listen("wake", woke)

        async def ping(k: int) -> None:
            f = waiting[str(k)] = loop.create_future()
            await v.notify("wake", str(k))
            await asyncio.wait_for(f, 5)

        wake = await timed(ops, ping, cpu["wake"])
        latencies = {"group_commit": commit, "claim": [c[1] for c in claims], "claim_wall": [claim_wall], "wake": wake}
        return latencies, {op: xs[0] for op, xs in cpu.items()}
    finally:
        await v.close()


def summary(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {"n": len(xs), "median_ms": statistics.median(xs) * 1e3,
            "p99_ms": xs[min(len(xs) - 1, int(len(xs) * 0.99))] * 1e3, "mean_ms": statistics.fmean(xs) * 1e3}


def import_time(modules: str) -> float:
    # asyncio is loaded first: the daemon has it already, and it would otherwise be charged to the driver
    code = f"import asyncio, time; t = time.perf_counter(); import {modules}; print(time.perf_counter() - t)"
    runs = [float(subprocess.check_output([sys.executable, "-c", code], text=True)) for _ in range(5)]
    return min(runs) * 1e3


def installed_kib(dists: list[str]) -> float:
    total = 0
    for d in dists:
        for f in importlib.metadata.distribution(d).files or []:
            p = Path(str(f.locate()))
            if p.is_file():
                total += p.stat().st_size
    return total / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    results: dict[str, dict[str, list[float]]] = {}
    per_round: dict[str, dict[str, list[float]]] = {}
    cpu: dict[str, dict[str, list[float]]] = {}
    with running_cluster() as cluster:
        print(f"PostgreSQL {cluster.version} at {cluster.url()}; psycopg {psycopg.__version__} "
              f"(libpq {psycopg.pq.version()}, impl {psycopg.pq.__impl__}), psycopg_pool "
              f"{importlib.metadata.version('psycopg-pool')}, asyncpg {asyncpg.__version__}", flush=True)
        for r in range(args.rounds):
            order = VARIANTS if r % 2 == 0 else VARIANTS[::-1]
            for cls in order:
                got, cpu_per_op = asyncio.run(run_variant(cls(), cluster.url(cluster.create_database("bench")), args.ops))
                for op, c in cpu_per_op.items():
                    cpu.setdefault(cls.name, {}).setdefault(op, []).append(c)
                for op, xs in got.items():
                    results.setdefault(cls.name, {}).setdefault(op, []).extend(xs)
                    per_round.setdefault(cls.name, {}).setdefault(op, []).append(statistics.median(xs))
                print(f"round {r + 1}: {cls.name} done", flush=True)

    report: dict[str, Any] = {"ops": args.ops, "rounds": args.rounds, "variants": {}}
    print(f"\n{'variant':18} {'operation':13} {'median ms':>10} {'p99 ms':>8} {'cpu µs/op':>10}  per-round medians")
    for name, ops in results.items():
        report["variants"][name] = {}
        for op, xs in ops.items():
            s = summary(xs)
            cpu_us = statistics.median(cpu[name][op]) * 1e6 if op in cpu[name] else float("nan")
            report["variants"][name][op] = {**s, "round_medians_ms": [m * 1e3 for m in per_round[name][op]],
                                            "client_cpu_us_per_op": cpu_us}
            rounds = " ".join(f"{m * 1e3:.3f}" for m in per_round[name][op])
            if op == "claim_wall":
                print(f"{name:18} {'claim total':13} {s['median_ms'] / 1e3:>9.2f}s {'':>8} {'':>10}  {rounds} ms "
                      f"({WORKERS * args.ops} claims)")
            else:
                print(f"{name:18} {op:13} {s['median_ms']:>10.3f} {s['p99_ms']:>8.3f} {cpu_us:>10.0f}  {rounds}")
    report["import_ms"] = {"psycopg+psycopg_pool": import_time("psycopg, psycopg_pool"),
                           "asyncpg": import_time("asyncpg")}
    report["installed_kib"] = {"psycopg+psycopg-binary+psycopg-pool":
                               installed_kib(["psycopg", "psycopg-binary", "psycopg-pool"]),
                               "asyncpg": installed_kib(["asyncpg"])}
    print(f"\nimport time (best of 5, ms): {report['import_ms']}")
    print(f"installed size (KiB): {report['installed_kib']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
