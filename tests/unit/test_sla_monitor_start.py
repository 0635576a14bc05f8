"""The SLA monitor starts with no file descriptor to spare: everything its scheduler needs is imported with it (a
daemon that ran out of descriptors just after it announced its start used to end on a lazy import)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import asyncio, os, resource
from polpo.clock import SystemClock
from polpo.sla.monitor import SlaMonitor

async def main():
    ticks = []
    async def check(now):
        ticks.append(now)
    monitor = SlaMonitor(check, SystemClock(), 0.05)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) - 1, hard))  # none to spare
    try:
        monitor.start()
        for _ in range(200):
            if ticks:
                break
            await asyncio.sleep(0.01)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    await monitor.shutdown()
    print("ticked" if ticks else "no tick")

asyncio.run(main())
"""


def test_the_monitor_starts_and_ticks_in_a_process_out_of_file_descriptors() -> None:
    # a process of its own: in this one, another test may have imported the scheduler's parts already
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ticked"
