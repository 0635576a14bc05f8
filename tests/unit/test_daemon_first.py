"""The daemon's start waits for the first of "ready" and "stop" (polpo.daemon._first): a stop asked while the
start-up is still waiting for the database (nemesis seed 12431: a node that lost its lease before its event log
caught up stayed half-alive for 23 s) is not held until the start-up is done."""

from __future__ import annotations

import anyio
import pytest

from polpo.daemon import _first

pytestmark = pytest.mark.anyio


async def test_the_first_event_set_wins_and_the_other_wait_ends() -> None:
    ready, stop = anyio.Event(), anyio.Event()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: _stop_soon(stop))
            assert await _first(ready, stop) is stop
    assert not ready.is_set()
    ready.set()
    assert await _first(ready, anyio.Event()) is ready


async def _stop_soon(stop: anyio.Event) -> None:
    await anyio.sleep(0.05)
    stop.set()
