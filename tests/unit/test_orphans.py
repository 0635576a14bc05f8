"""The orphan sweep finds a ``setsid`` escapee by reading only the main thread's children (Linux's reparenting rule)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# Run in a child interpreter: making pytest itself a subreaper would leave other tests' orphans as its zombies.
_PROBE = textwrap.dedent("""
    import os, subprocess, sys, threading, time
    from polpo.tools import orphans
    if not orphans.become_subreaper():
        print("no-subreaper"); sys.exit(0)
    pids = []
    def spawn():
        # the shell leaves a grandchild in a session of its own and exits: the grandchild is orphaned
        out = subprocess.run(["sh", "-c", "setsid sleep 30 > /dev/null 2>&1 < /dev/null & echo $!"],
                             capture_output=True, text=True, check=True).stdout
        pids.append(int(out))
    busy = [threading.Thread(target=time.sleep, args=(3,)) for _ in range(4)]  # threads besides the main one
    workers = [threading.Thread(target=spawn) for _ in range(3)]  # orphans' parents started from other threads
    for t in busy + workers:
        t.start()
    for t in workers:
        t.join()
    deadline = time.monotonic() + 10
    while set(pids) - set(orphans.adopted(set())) and time.monotonic() < deadline:
        time.sleep(0.02)
    found = orphans.adopted(set())
    print(sorted(pids) == sorted(p for p in found if p in pids), len(pids))
    killed = orphans.sweep(set(), lambda mark: False)  # no marker: not ours, so left alone
    for p in pids:
        os.kill(p, 9)
        os.waitpid(p, 0)
    print(killed)
""")


def test_orphans_of_children_started_by_any_thread_are_found_on_the_main_thread() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    if out.stdout.strip() == "no-subreaper":
        pytest.skip("this kernel refuses PR_SET_CHILD_SUBREAPER")
    found, killed = out.stdout.split("\n")[:2]
    assert found == "True 3"
    assert killed == "0"  # processes without an attempt marker are never killed by the sweep


_FRESH = textwrap.dedent("""
    import os, subprocess, sys, time
    from polpo.tools import orphans
    from polpo.tools.marks import ATTEMPT_MARK
    if not orphans.become_subreaper():
        print("no-subreaper"); sys.exit(0)
    # a child being started for a live attempt, not registered as known yet (the window of an asyncio spawn)
    child = subprocess.Popen(["sh", "-c", "read line; exit 7"], stdin=subprocess.PIPE,
                             env={**os.environ, ATTEMPT_MARK: "live-attempt"})
    orphans.sweep(set(), lambda mark: mark == "live-attempt")  # sees it alive, with its live marker
    child.stdin.close()  # now it exits
    deadline = time.monotonic() + 10
    while open(f"/proc/{child.pid}/stat").read().split(") ")[1][0] != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    orphans.sweep(set(), lambda mark: mark == "live-attempt")  # a zombie now: must not be reaped by the sweep
    pid, status = os.waitpid(child.pid, 0)  # ChildProcessError if the sweep had taken the exit status
    print(os.waitstatus_to_exitcode(status))
""")


def test_the_sweep_never_reaps_a_child_whose_attempt_is_live() -> None:
    out = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    if out.stdout.strip() == "no-subreaper":
        pytest.skip("this kernel refuses PR_SET_CHILD_SUBREAPER")
    assert out.stdout.strip() == "7"  # its starter gets the exit status
