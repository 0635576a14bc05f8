"""What a big workspace costs per attempt: the same mission in an empty folder and in 50 000-file workspaces.

Usage: .venv/bin/python scripts/bench_workspace.py [--files 50000] [--tasks 20] [--runs 3] [--concurrency 1 4]
       [--kinds empty git node plain] [--keep DIR]

Each run is a fresh daemon whose mission of ``--tasks`` one-line tasks (a command agent writing one file) runs in
a workspace of one kind:

* ``empty``: an empty folder (the reference);
* ``git``: a git repository with ``--files`` committed files (500 folders);
* ``node``: a plain folder with ``--files`` files, four fifths of them in ``node_modules``;
* ``plain``: a plain folder with ``--files`` ordinary files (reported; not part of the goal).

Reported per kind: the change tracker alone, in-process (first attempt, which starts watching the workspace,
then the median attempt), and the mission's wall time (drop → ``mission:completed``, median of the runs) and the extra time
per attempt over ``empty``: (wall − wall_empty) / attempts. Goal (issue 10): ≤ 50 ms per attempt for ``git`` and
``node``. The workspaces are built once (``--keep DIR`` keeps them for the next invocation) and reused by every
run; each run's files are removed before the next.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_common import drop, median, ts, wait_for

CONFIG = """
[daemon]
missions_dir = "missions"
state_dir = "state"
max_concurrency = {concurrency}

[security]
workspace_roots = ["{roots}"]

[agents.writer]
type = "command"
command = ["sh", "-c", "echo done > \\"out-$POLPO_TASK_ID.txt\\""]
timeout = 60
"""

KINDS = ("empty", "git", "node", "plain")


def _files(root: Path, n: int, under: str = "src") -> None:
    per_dir = 100
    for i in range(0, n, per_dir):
        d = root / under / f"d{i // per_dir}"
        d.mkdir(parents=True, exist_ok=True)
        for j in range(min(per_dir, n - i)):
            (d / f"f{j}.txt").write_text(f"{i + j}\n")


def build(kind: str, root: Path, n: int) -> Path:
    ws = root / kind
    if (ws / ".built").exists():
        return ws
    shutil.rmtree(ws, ignore_errors=True)
    ws.mkdir(parents=True)
    if kind == "git":
        _files(ws, n)
        (ws / ".gitignore").write_text(".built\n")
        env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
               "GIT_COMMITTER_EMAIL": "b@b"}
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "50k files"]):
            subprocess.run(["git", "-C", str(ws), *args], check=True, env=env)
        subprocess.run(["git", "-C", str(ws), "status", "--porcelain"], check=True, capture_output=True)
    elif kind == "node":
        _files(ws, n * 4 // 5, "node_modules")
        _files(ws, n - n * 4 // 5)
    elif kind == "plain":
        _files(ws, n)
    (ws / ".built").write_text("")
    return ws


def clean(ws: Path) -> None:
    for p in ws.glob("out-*.txt"):
        p.unlink()


@contextmanager
def daemon(ws_root: Path, concurrency: int) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    root = Path(tempfile.mkdtemp(prefix="polpo-bench-ws-"))
    (root / "missions").mkdir()
    (root / "polpo.toml").write_text(CONFIG.format(concurrency=concurrency, roots=ws_root))
    proc = subprocess.Popen([sys.executable, "-m", "polpo", "daemon", "--config", str(root / "polpo.toml")],
                            stdout=subprocess.DEVNULL, stderr=(root / "daemon.log").open("w"), text=True)
    try:
        wait_for(root, lambda e: e["event"] == "orchestrator:started", timeout=60)
        time.sleep(0.3)  # let the watcher settle in
        yield root, proc
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def run(ws: Path, ws_root: Path, tasks: int, concurrency: int) -> float:
    clean(ws)
    doc = {"workspace": str(ws), "tasks": [{"title": f"t{i}", "description": "one line", "assignTo": "writer"}
                                           for i in range(tasks)]}
    with daemon(ws_root, concurrency) as (root, _):
        t0 = drop(root, "m.json", doc)
        ev = wait_for(root, lambda e: e["event"] == "mission:completed", timeout=1800)
        files = [json.loads(x) for x in (root / "state" / "events.jsonl").read_text().splitlines()
                 if '"agent:finished"' in x]
        if os.environ.get("BENCH_SHOW"):
            print(subprocess.run([sys.executable, "-m", "polpo", "show", "m:2", "--config", str(root / "polpo.toml")],
                                 capture_output=True, text=True).stdout)
    assert ev["data"]["report"]["tasks"]["done"] == tasks, ev["data"]["report"]
    clean(ws)
    counts = sorted({f["data"]["filesChanged"] for f in files})
    shared = sum(1 for f in files if f["data"].get("filesNote"))
    if counts != [1] or shared:
        print(f"  ({ws.name}: files per attempt {counts}; {shared} of {len(files)} attempts not attributed: "
              "tasks overlapped in the workspace)" if shared else f"  ({ws.name}: files per attempt {counts})",
              flush=True)
    return ts(ev) - t0


def direct(spaces: dict[str, Path], attempts: int = 20) -> None:
    """The change tracker alone, in this process: one attempt = open a window, write a file, close it."""
    import anyio

    from polpo.changes.tracker import ChangeTracker

    async def measure() -> None:
        tracker = ChangeTracker()
        for kind, ws in spaces.items():
            times = []
            for i in range(attempts):
                t0 = time.perf_counter()
                with tracker.activity(ws, "t"):
                    t = await tracker.open(ws, "t")
                    (ws / f"out-{i}.txt").write_text("done\n")
                    files = await tracker.close(t)
                times.append(time.perf_counter() - t0)
                assert files["created"] == [f"out-{i}.txt"], files
            clean(ws)
            steady = sorted(times[1:])[len(times[1:]) // 2]
            print(f"tracker alone: {kind:<6} first attempt {1000 * times[0]:7.1f} ms (starts the watch), "
                  f"then median {1000 * steady:6.1f} ms per attempt", flush=True)
        tracker.shutdown()

    anyio.run(measure)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=50_000)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    ap.add_argument("--keep", type=Path, default=None, help="build the workspaces here and keep them")
    a = ap.parse_args()
    ws_root = a.keep or Path(tempfile.mkdtemp(prefix="polpo-bench-wsroot-"))
    ws_root.mkdir(parents=True, exist_ok=True)
    ws_root = ws_root.resolve()
    try:
        kinds = ["empty", *[k for k in a.kinds if k != "empty"]]
        spaces = {k: build(k, ws_root, a.files) for k in kinds}
        direct(spaces)
        print(f"{a.tasks} one-line tasks, {a.files} files, median of {a.runs} run(s)", flush=True)
        for conc in a.concurrency:
            walls: dict[str, list[float]] = {k: [] for k in kinds}
            for _ in range(a.runs):
                for k in kinds:  # interleaved, so machine noise hits every kind
                    walls[k].append(run(spaces[k], ws_root, a.tasks, conc))
            base = median(walls["empty"])
            for k in kinds:
                w = median(walls[k])
                extra = 1000 * (w - base) / a.tasks
                print(f"concurrency {conc}: {k:<6} wall {w:7.2f} s  ({', '.join(f'{x:.2f}' for x in walls[k])})"
                      + ("" if k == "empty" else f"  extra per attempt {extra:7.1f} ms"), flush=True)
    finally:
        if a.keep is None:
            shutil.rmtree(ws_root, ignore_errors=True)


if __name__ == "__main__":
    main()
