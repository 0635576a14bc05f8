"""The SLA monitor: ticks read the injected clock; the real scheduler fires them, never two at once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio
import pytest

from polpo.clock import FakeClock
from polpo.sla.deadlines import sla_status
from polpo.sla.monitor import SlaMonitor

pytestmark = pytest.mark.anyio

START = datetime(2026, 3, 1, tzinfo=UTC)


async def test_tick_checks_at_the_clock_time_and_drives_marks() -> None:
    clock = FakeClock(START)
    deadline = START + timedelta(minutes=10)
    recorded: list[str] = []

    async def check(now: datetime) -> None:
        already = set(recorded)
        recorded.extend(m.kind for m in sla_status(now, START, deadline, 0.8, already, entity_id="m",
                                                   entity_type="mission"))

    monitor = SlaMonitor(check, clock, 30)
    await monitor.tick()
    clock.advance(8 * 60)
    await monitor.tick()
    await monitor.tick()
    clock.advance(3 * 60)
    await monitor.tick()
    assert recorded == ["warning", "violated"]
    assert monitor.ticks == 4 and monitor.errors == 0


async def test_a_failing_check_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    async def check(now: datetime) -> None:
        raise RuntimeError("store is gone")

    monitor = SlaMonitor(check, FakeClock(START), timedelta(seconds=30))
    await monitor.tick()
    assert monitor.errors == 1 and "SLA check failed" in caplog.text


async def test_the_scheduler_calls_tick_on_its_interval() -> None:
    seen: list[datetime] = []
    three = anyio.Event()

    async def check(now: datetime) -> None:
        seen.append(now)
        if len(seen) >= 3:
            three.set()

    clock = FakeClock(START)
    monitor = SlaMonitor(check, clock, 0.05)
    monitor.start()
    try:
        with anyio.fail_after(5):
            await three.wait()
    finally:
        await monitor.shutdown()
    assert not monitor.running
    assert seen[0] == START  # the fake clock's time, not the wall clock's
    count = len(seen)
    # another monitor on the same loop ticks three times: the time for several ticks of the first one passed
    witness: list[datetime] = []
    done = anyio.Event()

    async def watch(now: datetime) -> None:
        witness.append(now)
        if len(witness) >= 3:
            done.set()
    other = SlaMonitor(watch, clock, 0.05)
    other.start()
    try:
        with anyio.fail_after(5):
            await done.wait()
    finally:
        await other.shutdown()
    assert len(seen) == count  # nothing after shutdown


async def test_a_slow_check_never_overlaps_itself() -> None:
    running = 0
    most = 0
    calls = 0
    release = anyio.Event()
    started = anyio.Event()

    async def check(now: datetime) -> None:
        nonlocal running, most, calls
        calls += 1
        running += 1
        most = max(most, running)
        started.set()
        try:
            await release.wait()
        finally:
            running -= 1

    monitor = SlaMonitor(check, FakeClock(START), 0.02)
    monitor.start()
    try:
        with anyio.fail_after(5):
            await started.wait()
            while monitor.skipped < 3:  # the scheduler tried three more ticks while the first still ran
                await anyio.sleep(0.01)
        assert calls == 1 and most == 1
        release.set()
        with anyio.fail_after(5):
            while calls < 3:
                await anyio.sleep(0.01)
    finally:
        await monitor.shutdown()
    assert most == 1


async def test_shutdown_lets_the_check_in_flight_finish() -> None:
    release = anyio.Event()
    started = anyio.Event()
    finished: list[bool] = []

    async def check(now: datetime) -> None:
        started.set()
        await release.wait()
        finished.append(True)

    monitor = SlaMonitor(check, FakeClock(START), 0.02)
    monitor.start()
    with anyio.fail_after(5):
        await started.wait()
    async with anyio.create_task_group() as tg:
        tg.start_soon(monitor.shutdown)
        await anyio.sleep(0.05)
        release.set()
    assert finished == [True]


async def test_shutdown_cancels_a_check_that_outlives_the_grace() -> None:
    started = anyio.Event()
    cancelled: list[bool] = []

    async def check(now: datetime) -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        except BaseException:
            cancelled.append(True)
            raise

    monitor = SlaMonitor(check, FakeClock(START), 0.02)
    monitor.start()
    with anyio.fail_after(5):
        await started.wait()
    await monitor.shutdown(grace=0.05)
    with anyio.fail_after(5):
        while not cancelled:
            await anyio.sleep(0.01)


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="greater than zero"):
        SlaMonitor(_noop, FakeClock(START), 0)


async def _noop(now: datetime) -> None:
    return None
