"""Long intake fuzzing: hostile files into a real daemon subprocess under a restart supervisor.

Usage: .venv/bin/python scripts/fuzz_intake.py [--files 2000] [--minutes 10] [--batch 100] [--seed 1]
                                               [--max-bytes 1048576] [--skip-validate] [--keep DIR]

The generator is the fuzz tests' (tests/support/fuzz_missions.py): mutated seeds (BOM, UTF-16/32, lone
surrogates, NUL, control characters, huge numbers, deep nesting, 100 000-item arrays, megabyte strings, byte
noise, truncation…) and non-files (directories, FIFOs, symlinks) named ``*.json``. Batches of ``--batch``
entries, each with one valid mission, are dropped into the missions folder of a daemon started with
``polpo daemon``; the supervisor restarts the daemon whenever it exits and counts that as a crash. For each
batch it waits until every entry has its one outcome (``mission:accepted`` or ``mission:rejected``) and every
accepted mission has finished, runs ``polpo validate`` on the batch and compares verdicts, and checks that
every entry is left as it was. At the end the daemon is restarted once more: it must decide nothing again.

Reports: entries, wall time, entries per second, crashes, the daemon's RSS before the first batch and after
each one (max and last), outcomes by reason, entries with no or several outcomes, validate disagreements,
changed entries. Exit 1 if anything is wrong. Outbound HTTP of the daemon goes to a closed local port.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.daemon import mission_json, polpo_cmd, shell_task, write_config
from tests.support.fuzz_missions import Entry, entries

AGENTS = """
[agents.shell]
type = "command"
command = ["true"]
timeout = 10
"""
NO_NETWORK = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
              "ALL_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost"}
VALID = mission_json(shell_task("ok", "true")).encode()


def rss_mb(pid: int, field: str = "VmRSS") -> float | None:
    """Resident memory of ``pid`` in MB (``VmHWM``: its peak so far)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class Events:
    """events.jsonl, read incrementally."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.all: list[dict[str, Any]] = []

    def poll(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return self.all
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            try:
                self.all.append(json.loads(line))
            except ValueError:
                self.all.append({"event": "unparsable line"})
        return self.all


class Supervisor:
    """Keeps one daemon running; an exit it did not ask for is a crash."""

    def __init__(self, config: Path, log_dir: Path) -> None:
        self.config = config
        self.log_dir = log_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.crashes: list[str] = []
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        err = open(self.log_dir / f"daemon-{self.starts}.err", "wb")  # noqa: SIM115 - the daemon's stderr
        self.proc = subprocess.Popen(polpo_cmd("daemon", "--config", str(self.config)), stdout=subprocess.DEVNULL,
                                     stderr=err, env={**os.environ, **NO_NETWORK})

    def check(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            tail = (self.log_dir / f"daemon-{self.starts}.err").read_bytes()[-3000:].decode(errors="replace")
            self.crashes.append(f"exit {self.proc.returncode}: {tail}")
            self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_started(sup: Supervisor, events: Events, seen: int, timeout: float = 120.0) -> bool:
    """Until the daemon says it started (restarting it when it dies); False after ``timeout`` seconds."""
    limit = time.monotonic() + timeout
    while not any(e["event"] == "orchestrator:started" for e in events.poll()[seen:]):
        if time.monotonic() > limit:
            return False
        sup.check()
        time.sleep(0.1)
    return True


def outcomes(events: list[dict[str, Any]], names: set[str]) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
    for e in events:
        if e["event"] in ("mission:accepted", "mission:rejected"):
            name = Path(e["data"]["file"]).name
            if name in names:
                out[name].append((e["event"].split(":")[1], e["data"].get("reason", "")))
    return out


def validate(config: Path, files: list[Path]) -> tuple[dict[str, bool], str | None]:
    r = subprocess.run([*polpo_cmd("validate", "--config", str(config)), *map(str, files)], capture_output=True,
                       env={**os.environ, **NO_NETWORK})
    out, err = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
    problem = None if r.returncode in (0, 1) and "Traceback" not in err else f"validate exit {r.returncode}: {err[-2000:]}"
    ok = {ln.split(": ok (")[0] for ln in out.splitlines() if ": ok (" in ln}
    return {f.name: str(f) in ok for f in files}, problem


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=2000, help="stop after this many entries")
    ap.add_argument("--minutes", type=float, default=10.0, help="or after this long")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-bytes", type=int, default=1024 * 1024,
                    help="[daemon] max_mission_bytes (0: leave it out, e.g. for a daemon that predates it)")
    ap.add_argument("--batch-timeout", type=float, default=300.0)
    ap.add_argument("--skip-validate", action="store_true", help="do not run `polpo validate` on the batches")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temp folder, removed)")
    args = ap.parse_args()

    root = args.keep or Path(tempfile.mkdtemp(prefix="polpo-fuzz-"))
    root.mkdir(parents=True, exist_ok=True)
    config = write_config(root, agents=AGENTS)
    if args.max_bytes:
        config.write_text(config.read_text().replace("[daemon]\n", f"[daemon]\nmax_mission_bytes = {args.max_bytes}\n", 1))
    missions, aside, state = root / "missions", root / "aside", root / "state"
    aside.mkdir(exist_ok=True)
    events = Events(state / "events.jsonl")
    sup = Supervisor(config, root)
    sup.start()
    if not wait_started(sup, events, 0):
        print(json.dumps({"problems": ["the daemon never started"], "crashes": sup.crashes[:1]}, indent=2))
        return 1
    assert sup.proc is not None
    rss_before = rss_mb(sup.proc.pid)
    rss_after: list[float] = []
    peak = 0.0
    problems: list[str] = []
    every: list[Entry] = []
    snapshots: dict[str, tuple[object, ...]] = {}
    disagreements: list[str] = []
    started = time.monotonic()
    deadline = started + args.minutes * 60
    batch_no = 0
    while len(every) < args.files and time.monotonic() < deadline:
        batch = list(entries(min(args.batch, args.files - len(every)), seed=args.seed * 100_000 + batch_no,
                             valid=VALID))
        valid = Entry(f"valid-{args.seed}-{batch_no}.json", "file", "valid", VALID)
        batch_no += 1
        for i, e in enumerate(batch):
            e.make(missions, aside)
            if i == len(batch) // 2:
                valid.make(missions, aside)
        for e in batch:
            snapshots[e.name] = e.snapshot(missions)
        verdicts, vproblem = ({}, None) if args.skip_validate else validate(config, [missions / e.name for e in batch])
        if vproblem:
            problems.append(vproblem)
        names = {e.name for e in batch} | {valid.name}
        limit = time.monotonic() + args.batch_timeout
        while True:
            sup.check()
            evs = events.poll()
            got = outcomes(evs, names)
            accepted = {e["missionId"] for e in evs if e["event"] == "mission:accepted"
                        and Path(e["data"]["file"]).name in names}
            finished = {e["missionId"] for e in evs if e["event"] == "mission:completed"}
            if len(got) == len(names) and accepted <= finished:
                break
            if time.monotonic() > limit:
                problems.append(f"batch {batch_no}: {len(names) - len(got)} entries without an outcome, "
                                f"{len(accepted - finished)} missions unfinished after {args.batch_timeout} s")
                break
            time.sleep(0.2)
        for e in batch:
            if e.name in got and e.name in verdicts and verdicts[e.name] != (got[e.name][0][0] == "accepted"):
                disagreements.append(f"{e.name} ({e.what}): validate {'ok' if verdicts[e.name] else 'invalid'}, "
                                     f"daemon {got[e.name]}")
        if got.get(valid.name, [("", "")])[0][0] != "accepted":
            problems.append(f"valid mission {valid.name}: {got.get(valid.name)}")
        every.extend(batch)
        rss = rss_mb(sup.proc.pid)
        if rss is not None:
            rss_after.append(rss)
        peak = max(peak, rss_mb(sup.proc.pid, "VmHWM") or 0.0)
        print(f"batch {batch_no}: {len(every)} entries, {time.monotonic() - started:.0f} s, "
              f"RSS {rss or 0:.0f} MB, crashes {len(sup.crashes)}", flush=True)
    wall = time.monotonic() - started

    # the restart: every entry is scanned again and nothing is decided again
    sup.stop()
    seen = len(events.poll())
    sup.start()
    sentinel = Entry("zz-sentinel.json", "file", "sentinel", VALID[:10])
    if not wait_started(sup, events, seen):
        problems.append("the daemon did not start again after the run")
    sentinel.make(missions, aside)
    limit = time.monotonic() + 120
    while not outcomes(events.poll()[seen:], {sentinel.name}) and time.monotonic() < limit:
        sup.check()
        time.sleep(0.2)
    again = outcomes(events.poll()[seen:], {e.name for e in every})
    sup.stop()

    evs = events.poll()
    names = {e.name for e in every}
    got = outcomes(evs[:seen], names)
    reasons = collections.Counter(o[0][1] or "accepted" for o in got.values())
    missing = sorted(names - set(got))
    several = sorted(n for n, o in got.items() if len(o) > 1)
    changed = sorted(e.name for e in every if e.snapshot(missions) != snapshots[e.name])
    internal = [e for e in evs if e["event"] == "task:error"]
    report = {
        "entries": len(every), "wall_seconds": round(wall, 1), "entries_per_second": round(len(every) / wall, 2),
        "crashes": len(sup.crashes), "daemon_starts": sup.starts,
        "rss_mb": {"before": rss_before, "after_last_batch": rss_after[-1] if rss_after else None,
                   "max_after_a_batch": max(rss_after, default=None), "peak": peak},
        "outcomes": dict(reasons), "without_outcome": len(missing), "several_outcomes": len(several),
        "decided_again_after_restart": len(again), "validate_disagreements": len(disagreements),
        "changed_entries": len(changed), "task_errors": len(internal), "problems": problems,
    }
    print(json.dumps(report, indent=2))
    for c in sup.crashes[:3]:
        print("CRASH:", c, file=sys.stderr)
    for d in disagreements[:10]:
        print("DISAGREE:", d, file=sys.stderr)
    for n in (missing + several + changed)[:10]:
        print("ENTRY:", n, file=sys.stderr)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    bad = sup.crashes or problems or missing or several or again or disagreements or changed or internal
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
