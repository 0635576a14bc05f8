"""What a long history costs: a daemon restarted on N finished missions, then its reads and its state's size.

Usage: .venv/bin/python scripts/bench_history.py [--sizes 1000 10000 100000] [--stores sqlite postgres]
                                                 [--files keep|done|none] [--runs 3] [--retention] [--keep DIR]
                                                 [--no-compile]

For each store and N: a fresh state is filled with N finished 3-task missions (scripts/history_fill.py: written
through the store's own write path, ~29 events each, spread over the last 30 days) and, with ``--files keep``
(the default, the worst case for the intake's start-up scan), their N mission files left in the missions folder;
``done`` puts them in ``missions/done/`` (what a daemon that files finished missions leaves), ``none`` writes
none. A first start is not measured (it stamps the files it finds, once). Then, ``--runs`` times: the daemon is started on it (timed from the spawn to ``orchestrator:started``, and
to READY=1 on a notify socket of our own: the missions folder is scanned and watched), and until its CPU goes
quiet (``busy_s``: what the start and the intake's start-up scan cost; ``cpu_s``: its CPU seconds by then); its
RSS then; then it is timed answering ``polpo status``
(median of 5 runs of the CLI), ``polpo show h7`` (5), ``GET /api/missions`` (median of 20) and
``GET /api/missions/h7`` (20); then stopped. The state's size is the database (SQLite: the file and its WAL;
PostgreSQL: ``pg_database_size``) and the state folder. ``--retention``: then ``[retention] finished = 1 day``
is applied on a fake clock a year later (polpo.retention, in this process), and the size measured again (on
PostgreSQL also after a ``VACUUM FULL``, which gives the space autovacuum reuses back to the system).

polpo's .pyc files are written first, as an installed polpo has them (:func:`bench_common.write_bytecode`);
``--no-compile`` times a checkout under PYTHONDONTWRITEBYTECODE=1 instead, which compiles every module it
imports in every process (~30 ms of a `polpo status`).

Goals (issue 31) at 100 000 on SQLite and PostgreSQL: restart ≤ 1.5 s, RSS ≤ the 1 000-mission RSS + 20 MB,
``polpo status`` and ``GET /api/missions`` ≤ 0.2 s; after the retention the state is what live missions need.
The fill takes about 2.5 ms a mission on SQLite (4 minutes at 100 000), more on PostgreSQL.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_common import CONFIG as BENCH_CONFIG
from bench_common import cpu_seconds, write_bytecode
from history_fill import fill, write_rotated_log

from polpo.clock import FakeClock

CONFIG = BENCH_CONFIG.format(concurrency=4) + '\n[http]\nlisten = "127.0.0.1:0"\n'


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def du_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


async def _fill(root: Path, n: int, url: str | None, files: str) -> None:
    from polpo.config import StoreSettings
    from polpo.store.core import StoreCore

    clock = FakeClock(datetime.now(UTC) - timedelta(days=30))
    store: StoreCore
    if url is None:
        from polpo.store.sqlite import SqliteStore

        store = await SqliteStore.open(root / "state" / "polpo.db", clock=clock)
    else:
        from polpo.store.postgres import PostgresStore

        store = await PostgresStore.open(StoreSettings(url=url), clock=clock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.run_writer)
        await fill(store, clock, n, missions_dir=root / "missions", state_dir=root / "state", files=files)
        tg.cancel_scope.cancel()
    await store.close()
    write_rotated_log(root / "state", store.identity, store.last_seq)


@contextlib.contextmanager
def notify_socket(root: Path) -> Iterator[socket.socket]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = root / "notify.sock"
    s.bind(str(path))
    try:
        yield s
    finally:
        s.close()
        path.unlink(missing_ok=True)


def timed(cmd: list[str], runs: int, cwd: Path) -> float:
    xs = []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
        xs.append(time.perf_counter() - t0)
        if r.returncode != 0:
            raise RuntimeError(f"{cmd}: {r.stderr}")
    return statistics.median(xs)


def http_median(url: str, path: str, runs: int) -> float:
    host, port = url.split("//")[1].rsplit(":", 1)
    con = http.client.HTTPConnection(host, int(port), timeout=300)
    xs = []
    for _ in range(runs):
        t0 = time.perf_counter()
        con.request("GET", path)
        body = con.getresponse().read()
        xs.append(time.perf_counter() - t0)
        assert body
    con.close()
    return statistics.median(xs)


def unstamped(root: Path) -> int:
    """The files' records without a stamp yet (SQLite; -1 for PostgreSQL, or a daemon without stamps)."""
    db = root / "state" / "polpo.db"
    if not db.exists():
        return -1
    import sqlite3

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return int(con.execute("SELECT COUNT(*) - COUNT(stamp) FROM sources").fetchone()[0])
    except sqlite3.OperationalError:  # a daemon from before stamps (an A/B run against it)
        return -1
    finally:
        con.close()


def restart(root: Path, *, quiet: float, stamping: bool = False) -> dict[str, float]:
    """One start of the daemon on the state: timings, RSS, reads; stopped at the end. ``stamping``: the first
    start after the fill, which reads the files of the folder once; it goes on until they are all stamped (or no
    more are for a minute)."""
    out: dict[str, float] = {}
    log = root / "state" / "events.jsonl"
    start_offset = log.stat().st_size if log.exists() else 0
    with notify_socket(root) as sock:
        env = {**os.environ, "NOTIFY_SOCKET": str(root / "notify.sock")}
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "polpo", "daemon", "--config", str(root / "polpo.toml")],
                                stdout=subprocess.DEVNULL, stderr=(root / "daemon.log").open("a"), env=env)
        try:
            sock.settimeout(300)
            started = None
            while True:
                msg = sock.recv(4096).decode()
                if "READY=1" in msg:
                    out["ready_s"] = time.perf_counter() - t0
                    break
            with open(log) as f:
                f.seek(start_offset)
                for line in f:
                    ev = json.loads(line)
                    if ev["event"] == "orchestrator:started":
                        started = datetime.fromisoformat(ev["ts"].replace("Z", "+00:00")).timestamp()
                        break
            assert started is not None
            spawn_wall = time.time() - (time.perf_counter() - t0)
            out["started_s"] = started - spawn_wall
            out["busy_s"], out["cpu_s"] = settled(proc.pid, t0, quiet)
            last, since = unstamped(root), time.monotonic()
            while stamping and last > 0 and time.monotonic() - since < 60:
                time.sleep(1)
                now = unstamped(root)
                if now < last:
                    last, since = now, time.monotonic()
            out["rss_mb"] = rss_mb(proc.pid)
            url = json.loads((root / "state" / "http.json").read_text())["url"]
            py = [sys.executable, "-m", "polpo"]
            cfg = ["--config", str(root / "polpo.toml")]
            out["status_s"] = timed([*py, "status", *cfg], 5, root)
            out["show_s"] = timed([*py, "show", "h7", *cfg], 5, root)
            out["api_missions_s"] = http_median(url, "/api/missions", 20)
            out["api_mission_s"] = http_median(url, "/api/missions/h7", 20)
        finally:
            proc.terminate()
            proc.wait(timeout=600)
    return out


QUIET = {"sqlite": 0.02, "postgres": 0.05}
"""A core's share under which a daemon counts as quiet. An idle SQLite daemon uses a fraction of 2 %; an idle
PostgreSQL node polls its command inbox, renews its heartbeat and follows the others' events: 1.0-2.4 % measured
on this 2-core machine, so 2 % left the bench waiting out its limit. A busy daemon gets more than 5 % of a core
even on a machine at load 20."""


def settled(pid: int, t0: float, quiet_share: float, limit: float = 600) -> tuple[float, float]:
    """(seconds from the spawn until the daemon goes quiet: what its start, the intake's start-up scan included,
    cost in time; its CPU seconds by then). Quiet: under ``quiet_share`` of a core for three seconds in a row
    (:data:`QUIET`); one that never goes quiet is reported at ``limit``."""
    last, quiet = cpu_seconds(pid)[0], 0
    while time.perf_counter() - t0 < limit:
        time.sleep(1.0)
        now = cpu_seconds(pid)[0]
        quiet = quiet + 1 if now - last < quiet_share else 0
        last = now
        if quiet == 3:
            return time.perf_counter() - t0 - 3.0, now
    return limit, last


def db_mb(root: Path, pg: Any, dbname: str | None) -> float:
    if pg is None:
        return sum(p.stat().st_size for p in (root / "state").glob("polpo.db*")) / 2**20
    return int(pg.psql(f"SELECT pg_database_size('{dbname}')").strip()) / 2**20


async def _retention(root: Path, url: str | None) -> dict[str, float]:
    """``[retention] finished = 1 day`` on a fake clock a year later, until nothing more is removed."""
    from polpo.config import parse_config
    from polpo.retention.pruner import run_once
    from polpo.store.open import open_store

    raw_cfg = root / "polpo.toml"
    import tomllib

    raw = tomllib.loads(raw_cfg.read_text())
    raw["retention"] = {"finished": "P1D"}
    cfg = parse_config(raw, raw_cfg)
    clock = FakeClock(datetime.now(UTC) + timedelta(days=365))
    store = await open_store(cfg, clock)
    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.run_writer)
        removed = await run_once(cfg, store, clock, until_done=True)
        tg.cancel_scope.cancel()
    took = time.perf_counter() - t0
    await store.close()
    return {"retention_s": took, "removed": float(removed)}


def bench(n: int, store: str, files: str, runs: int, retention: bool, keep: Path | None, pg: Any,
          max_big: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix=f"polpo-history-{store}-{n}-", dir=keep))
    (root / "missions").mkdir()
    (root / "state").mkdir()
    config = CONFIG
    dbname = None
    url = None
    if pg is not None:
        dbname = pg.create_database("history")
        url = pg.url(dbname)
        config += f'\n[store]\nurl = "{url}"\n'
    (root / "polpo.toml").write_text(config)
    t0 = time.perf_counter()
    anyio.run(_fill, root, n, url, files)
    row: dict[str, Any] = {"store": store, "missions": n, "files": files, "fill_s": round(time.perf_counter() - t0, 1)}
    restart(root, quiet=QUIET[store], stamping=files == "keep")  # the first start reads each file in the folder once
    samples = [restart(root, quiet=QUIET[store]) for _ in range(runs if n < 100_000 else min(runs, max_big))]
    for key in samples[0]:
        row[key] = round(statistics.median(s[key] for s in samples), 3)
    row["db_mb"] = round(db_mb(root, pg, dbname), 1)
    row["state_mb"] = round(du_mb(root / "state"), 1)
    if retention:
        row.update({k: round(v, 2) for k, v in anyio.run(_retention, root, url).items()})
        row["db_mb_after"] = round(db_mb(root, pg, dbname), 1)
        row["state_mb_after"] = round(du_mb(root / "state"), 1)
        if pg is not None:  # the space autovacuum made reusable, given back as an operator would (it locks)
            pg.psql("VACUUM FULL", dbname)
            row["db_mb_vacuum_full"] = round(db_mb(root, pg, dbname), 1)
    if keep is None:
        shutil.rmtree(root, ignore_errors=True)
        if pg is not None and dbname is not None:
            pg.drop_database(dbname)
    else:
        row["root"] = str(root)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    ap.add_argument("--stores", nargs="+", choices=["sqlite", "postgres"], default=["sqlite", "postgres"])
    ap.add_argument("--files", choices=["keep", "done", "none"], default="keep")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--big-runs", type=int, default=3, help="runs at 100 000 missions and more (each is long)")
    ap.add_argument("--retention", action="store_true", help="apply a 1-day retention a year later, then measure")
    ap.add_argument("--keep", type=Path, help="leave the states in this folder")
    ap.add_argument("--no-compile", action="store_true", help="do not write polpo's .pyc files first")
    args = ap.parse_args()
    if not args.no_compile:
        write_bytecode()
    bytecode = "without .pyc files unless Python writes them" if args.no_compile else "with .pyc files"
    print(f"load average {os.getloadavg()[0]:.2f}; {sys.executable}; {bytecode}", flush=True)
    for store in args.stores:
        ctx: Any = contextlib.nullcontext(None)
        if store == "postgres":
            from tests.support.postgres import running_cluster

            ctx = running_cluster()
        with ctx as pg:
            for n in args.sizes:
                print(json.dumps(bench(n, store, args.files, args.runs, args.retention, args.keep, pg,
                                     args.big_runs)), flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
