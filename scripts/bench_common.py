"""Shared helpers for the benchmarks: a throw-away daemon on a temp folder, timed through its event log."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

CONFIG = """
[daemon]
missions_dir = "missions"
state_dir = "state"
max_concurrency = {concurrency}

[agents.noop]
type = "command"
command = ["true"]
timeout = 60
"""


@contextmanager
def bench_daemon(concurrency: int = 8, store_url: str | None = None) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A daemon on a fresh temp folder; its state in SQLite there, or in the PostgreSQL database ``store_url``."""
    root = Path(tempfile.mkdtemp(prefix="polpo-bench-"))
    (root / "missions").mkdir()
    store = f'\n[store]\nurl = "{store_url}"\n' if store_url else ""
    (root / "polpo.toml").write_text(CONFIG.format(concurrency=concurrency) + store)
    proc = subprocess.Popen([sys.executable, "-m", "polpo", "daemon", "--config", str(root / "polpo.toml")],
                            stdout=subprocess.DEVNULL, stderr=(root / "daemon.log").open("w"), text=True)
    try:
        wait_for(root, lambda e: e["event"] == "orchestrator:started", timeout=60)
        time.sleep(0.3)  # let the watcher settle in
        yield root, proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def events(root: Path) -> list[dict[str, Any]]:
    p = root / "state" / "events.jsonl"
    if not p.exists():
        return []
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


def wait_for(root: Path, pred: Any, timeout: float = 600) -> dict[str, Any]:
    """Follow events.jsonl incrementally (never re-reading it: the bench must not compete for the CPU)."""
    deadline = time.monotonic() + timeout
    path = root / "state" / "events.jsonl"
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    with open(path) as f:
        buf = ""
        while time.monotonic() < deadline:
            chunk = f.read()
            if not chunk:
                time.sleep(0.01)
                continue
            buf += chunk
            *lines, buf = buf.split("\n")
            for line in lines:
                if line.strip():
                    ev = json.loads(line)
                    if pred(ev):
                        return ev
    raise TimeoutError("event not seen")


def drop(root: Path, name: str, doc: dict[str, Any]) -> float:
    """Write a mission atomically; return the wall time of the rename."""
    tmp = root / "missions" / f".{name}.tmp"
    tmp.write_text(json.dumps(doc))
    t = time.time()
    os.replace(tmp, root / "missions" / name)
    return t


def ts(ev: dict[str, Any]) -> float:
    return datetime.fromisoformat(ev["ts"].replace("Z", "+00:00")).timestamp()


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def median(xs: list[float]) -> float:
    return statistics.median(xs)
