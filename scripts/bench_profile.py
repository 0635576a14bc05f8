"""Where the daemon's time goes on the throughput bench: a py-spy profile and exact call counts.

Usage: .venv/bin/python scripts/bench_profile.py --out DIR [--sizes 1000 10000] [--no-pyspy] [--no-counts] [--gil]
For each N (one mission of N trivial tasks, concurrency 8):
* py-spy (`pip install py-spy`; needs ptrace, e.g. root) attaches to the running daemon from the drop to
  mission:completed and writes DIR/pyspy-N.txt (collapsed stacks: open it in speedscope, or feed it to
  flamegraph.pl); the top self-time and cumulative functions are printed (share of the busy samples).
  A thread waiting for the GIL counts as busy; --gil samples only the thread holding it (pyspy-gil-N.txt).
* the daemon runs again under scripts/callcount.py (every invocation in every thread, DIR/calls-N.json)
  and the counts per task of what the issue asks about are printed: cancel scopes, thread hand-offs,
  SQLite calls, redact, clock.iso, event-log writes, plus the daemon's write syscalls per task (syscw of
  /proc/PID/io, every thread, from a run without the counter).
"""

from __future__ import annotations

import argparse
import json
import linecache
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_common import bench_daemon, run_mission, trivial_tasks, write_syscalls

_IDLE = re.compile(r"\.(get|wait|select|poll|acquire)\(|waitpid\(|\.sleep\(")


def _frame(frame: str) -> tuple[str, str, int]:
    """``fn (/path/to/file.py:12)`` → (``fn (to/file.py)``, path, line)."""
    name, _, where = frame.rpartition(" (")
    path, _, line = where.rstrip(")").rpartition(":")
    return f"{name} ({'/'.join(Path(path).parts[-2:])})", path, int(line) if line.isdigit() else 0


def _idle(name: str, path: str, line: int) -> bool:
    """A sample whose innermost frame waits (queue get, condition wait, epoll, waitpid) is not CPU.

    So is an anyio worker thread inside a C function it was handed directly: in the daemon that is
    watchfiles' blocking wait for file events (Python callees such as ``snapshot`` show their own frame).
    """
    return name.startswith("WorkerThread.run ") or bool(_IDLE.search(linecache.getline(path, line)))


#: functions whose cumulative share is always printed (matched on the start of the frame name)
WATCH = ("redact ", "secret_values ", "iso ", "EventLog.write ", "snapshot ", "Store._write_batch ",
         "Store.submit ", "process_start_ticks ", "agent_env ", "run_process ", "open_process ",
         "CancelScope.__enter__ ", "CancelScope.__exit__ ", "run_sync ", "Connection._execute ")


_OUTER = ("BaseEventLoop._run_once ", "Thread._bootstrap_inner ")


def summarize_pyspy(path: Path, top: int = 20) -> str:
    self_t: Counter[str] = Counter()
    cum_t: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    busy = idle = 0
    for raw in path.read_text().splitlines():
        stack, _, count = raw.rpartition(" ")
        thread, _, frames_text = stack.partition(";")
        frames = [_frame(f) for f in frames_text.split(";") if f.endswith(")")]
        if not frames:
            continue
        n = int(count)
        if _idle(*frames[-1]):
            idle += n
            continue
        busy += n
        threads[re.sub(r"[-\d]+$", "", thread.partition(": ")[2]) or "(unnamed)"] += n
        self_t[frames[-1][0]] += n
        outer = max((i for i, f in enumerate(frames) if f[0].startswith(_OUTER)), default=-1)
        for name in {f[0] for f in frames[outer + 1:]}:
            cum_t[name] += n
    lines = [f"{busy} busy samples ({idle} idle ones dropped: innermost frame waiting); by thread:"]
    lines += [f"  {100 * c / busy:5.1f}%  {t}" for t, c in threads.most_common()]
    lines.append("top self:")
    lines += [f"  {100 * c / busy:5.1f}%  {f}" for f, c in self_t.most_common(top)]
    lines.append("top cumulative (below the event loop's _run_once and threads' _bootstrap_inner):")
    lines += [f"  {100 * c / busy:5.1f}%  {f}" for f, c in cum_t.most_common(top + 10)]
    lines.append("watched (cumulative):")
    lines += [f"  {100 * c / busy:5.1f}%  {f}" for f, c in cum_t.most_common() if f.startswith(WATCH)]
    return "\n".join(lines)


def pyspy_run(n: int, out: Path, gil: bool = False) -> Path:
    dest = out / f"pyspy-{'gil-' if gil else ''}{n}.txt"
    with bench_daemon() as (root, proc):
        spy = subprocess.Popen([shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy"),
                                "record", "--pid", str(proc.pid), "--format", "raw", "--rate", "200", "--threads", "--full-filenames", "--nonblocking",
                                "--output", str(dest), *(["--gil"] if gil else [])], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.0)  # attached
        w0 = write_syscalls(proc.pid)
        run = run_mission(root, proc, f"n{n}", {"tasks": trivial_tasks(n)}, timeout=3600)
        writes = write_syscalls(proc.pid) - w0
        spy.send_signal(signal.SIGINT)
        _, err = spy.communicate(timeout=120)
    if not dest.exists():
        raise SystemExit(f"py-spy wrote nothing: {err.decode()[-2000:]}")
    print(f"N={n} under py-spy: {run.ms_per_task:.2f} ms/task, CPU {run.cpu_ms_per_task:.2f} ms/task "
          f"(own {run.self_cpu_ms_per_task:.2f}), write syscalls (all threads) {writes / n:.1f} /task")
    return dest


#: label → (path fragment, qualified name); "c:" names are C functions (see callcount.py).
COUNTERS: dict[str, tuple[str, str]] = {
    "anyio CancelScope.__enter__": ("anyio/", "CancelScope.__enter__"),
    "anyio.to_thread.run_sync (thread hand-off)": ("anyio/to_thread.py", "run_sync"),
    "aiosqlite Connection._execute (hand-off)": ("aiosqlite/", "Connection._execute"),
    "asyncio call_soon_threadsafe": ("asyncio/", "BaseEventLoop.call_soon_threadsafe"),
    "threading Thread.start": ("threading.py", "Thread.start"),
    "SQLite execute (aiosqlite, one statement)": ("aiosqlite/", "Connection.execute"),
    "SQLite executemany (aiosqlite, one per table)": ("aiosqlite/", "Connection.executemany"),
    "SQLite commit (aiosqlite)": ("aiosqlite/", "Connection.commit"),
    "polpo secrets redact": ("polpo/", "redact"),
    "polpo secrets secret_values": ("polpo/", "secret_values"),
    "polpo clock iso": ("polpo/", "iso"),
    "polpo EventLog.write": ("polpo/", "EventLog.write"),
    "FileIO.write (unbuffered: one syscall each)": ("", "c:_io.FileIO.write"),
    "orjson.dumps": ("", "c:orjson.dumps"),
    "os.environ item reads": ("", "_Environ.__getitem__"),
    "subprocess Popen.__init__": ("subprocess.py", "Popen.__init__"),
}


def callcount_run(n: int, out: Path) -> None:
    dest = out / f"calls-{n}.json"
    counter = [str(Path(__file__).parent / "callcount.py"), str(dest)]
    with bench_daemon(python_args=counter) as (root, proc):
        run = run_mission(root, proc, f"n{n}", {"tasks": trivial_tasks(n)}, timeout=7200)
    counts: dict[str, int] = json.loads(dest.read_text())  # written at exit: bench_daemon waited for it
    print(f"N={n} counted (start-up and shutdown included; counting slows it to {run.ms_per_task:.1f} ms/task):")
    for label, (where, name) in COUNTERS.items():
        calls = sum(c for key, c in counts.items()
                    if (key == name if name.startswith("c:") else
                        where in key and key.rsplit(":", 1)[1] == name))
        print(f"  {label:<46} {calls / n:8.2f} /task")
    print("  most called (per task):")
    for key, c in list(counts.items())[:25]:
        print(f"    {c / n:9.2f}  {_short(key)}")


def _short(key: str) -> str:
    path, _, name = key.rpartition(":")
    return f"{name} ({'/'.join(Path(path).parts[-2:])})" if path and not key.startswith("c:") else key


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--no-pyspy", action="store_true")
    ap.add_argument("--no-counts", action="store_true")
    ap.add_argument("--gil", action="store_true", help="py-spy samples only the thread holding the GIL")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for n in args.sizes:
        if not args.no_pyspy:
            print(summarize_pyspy(pyspy_run(n, args.out, args.gil)), flush=True)
        if not args.no_counts:
            callcount_run(n, args.out)


if __name__ == "__main__":
    main()
