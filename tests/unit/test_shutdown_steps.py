"""The stop's deadlines (polpo.shutdown): a step that never ends is abandoned in its time and the rest go on
with less; the last resort ends a process whose stop hangs, with one line saying why. Whether a node may start
another guard (polpo.tools.guard_link.keeps_guard) is a pure rule on when the earlier ones were lost."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import anyio
import pytest

from polpo.clock import SystemClock
from polpo.shutdown import StopSteps
from polpo.tools.guard_link import LOSS_WINDOW, LOSSES, keeps_guard


@pytest.mark.anyio
async def test_a_step_that_never_ends_is_abandoned_and_the_next_ones_get_less() -> None:
    steps = StopSteps(SystemClock(), budget=5.0, step=0.3)
    done: list[str] = []

    async def hangs() -> None:
        await anyio.sleep_forever()

    async def quick() -> None:
        done.append("quick")

    start = anyio.current_time()
    assert await steps.step("the first", quick)
    assert not await steps.step("a dead socket", hangs)
    assert await steps.step("the next", quick)
    with anyio.fail_after(3):  # after an abandoned step, each later one has AFTER_ABANDONED (1 s) at most
        assert not await steps.step("another dead socket", hangs)
    assert steps.abandoned == ["a dead socket", "another dead socket"]
    assert done == ["quick", "quick"]
    assert anyio.current_time() - start < 3


@pytest.mark.anyio
async def test_steps_share_one_budget() -> None:
    steps = StopSteps(SystemClock(), budget=0.2, step=5.0)

    async def hangs() -> None:
        await anyio.sleep_forever()

    with anyio.fail_after(3):
        assert not await steps.step("slow", hangs)
    assert steps.left() == 0.0


def test_the_last_resort_ends_a_stop_that_hangs_with_its_reason() -> None:
    code = ("import time; from polpo.shutdown import LastResort; "
            "LastResort(lambda: print('agents killed', flush=True)).arm(0.2, lambda: 'the lease is gone'); "
            "time.sleep(30)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert done.returncode == 1
    assert done.stdout == "agents killed\n"
    assert done.stderr.startswith("polpo: stopped: the lease is gone; the stop did not end within 0.2 s")
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_node_keeps_a_guard_until_too_many_are_lost_within_the_window() -> None:
    assert keeps_guard([], 0.0)
    recent = [100.0 + i for i in range(LOSSES - 1)]
    assert keeps_guard(recent, 110.0)
    assert not keeps_guard([*recent, 105.0], 110.0)
    old = [100.0 + i for i in range(LOSSES)]
    assert keeps_guard(old, 100.0 + LOSS_WINDOW + LOSSES)  # losses long ago no longer count


@pytest.mark.anyio
async def test_a_step_that_fails_does_not_stop_the_stop() -> None:
    steps = StopSteps(SystemClock(), budget=5.0, step=1.0)

    async def fails() -> None:
        raise ConnectionResetError(104, "Connection reset by peer")

    assert not await steps.step("the event log's last read", fails)
    assert steps.abandoned == []  # (it answered: the next steps keep their time)


def test_the_last_resort_counts_only_the_time_the_process_ran() -> None:
    """A node SIGSTOPped in the middle of its stop (nemesis seed 1012) resumes with its margin left: the timer
    does not fire the moment the process wakes, ending a stop that was about to end well; it still fires later."""
    code = ("import time; from polpo.shutdown import LastResort; "
            "LastResort().arm(2.0, lambda: 'asked to stop'); print('armed', flush=True); time.sleep(30)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "armed\n"
        proc.send_signal(signal.SIGSTOP)
        time.sleep(3.0)  # longer than the whole margin, all of it stopped
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.5)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert proc.wait(timeout=20) == 1  # ... and it fires once it has run its 2 s
        assert proc.stderr is not None and "the stop did not end within 2 s" in proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
