"""anyio's worker threads, all taken: what a check does on the event loop finishes, what needs a thread waits."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import anyio
import anyio.to_thread

T = TypeVar("T")

__all__ = ["every_worker_thread_taken", "waits_for_a_thread"]


@asynccontextmanager
async def every_worker_thread_taken() -> AsyncIterator[Callable[[], None]]:
    """Within the block ``anyio.to_thread.run_sync`` waits (its one thread is taken); yields what frees it."""
    threads = anyio.to_thread.current_default_thread_limiter()
    threads.total_tokens = 1
    busy = object()
    await threads.acquire_on_behalf_of(busy)

    def free() -> None:
        if threads.borrowed_tokens:
            threads.release_on_behalf_of(busy)

    try:
        yield free
    finally:
        free()


async def waits_for_a_thread(call: Callable[[], Awaitable[T]], free: Callable[[], None]) -> T:
    """``call``'s result, having checked that it waited (for a worker thread) until ``free`` was called."""
    got: list[T] = []

    async def run() -> None:
        got.append(await call())

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await anyio.wait_all_tasks_blocked()
        assert got == [], "it did not wait for a worker thread"
        free()
    return got[0]
