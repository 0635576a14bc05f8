"""litellm, imported lazily and once, off the event loop: ``import litellm`` costs ~4 s (more on a loaded
machine), so it happens in a thread while the loop keeps serving events, and the first call waits for it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable
from typing import Any

import anyio

__all__ = ["load_litellm"]

_litellm: Any = None
_import_lock: anyio.Lock | None = None


async def load_litellm() -> Any:
    """Import litellm once, off the event loop; later calls return the module at once."""
    global _litellm, _import_lock
    if _litellm is not None:
        return _litellm
    if _import_lock is None:
        _import_lock = anyio.Lock()
    async with _import_lock:
        if _litellm is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch at import
            _litellm = await _in_daemon_thread(_import)
    return _litellm


async def _in_daemon_thread(fn: Callable[[], Any]) -> Any:
    """``fn()`` in a daemon thread of its own: a process that stops meanwhile (a node fenced right after its start)
    exits at once instead of waiting for the import (tens of seconds on a loaded machine), as a worker thread's
    would make it wait at interpreter exit. Runs on the asyncio loop only (the daemon's)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if not done.done():
            done.set_exception(error) if error is not None else done.set_result(value)

    def work() -> None:
        try:
            value, error = fn(), None
        except BaseException as e:
            value, error = None, e
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=work, name="litellm import", daemon=True).start()
    return await asyncio.shield(done)  # a cancelled caller does not cancel the import another may wait for


def _import() -> Any:
    import litellm

    litellm.suppress_debug_info = True  # its "give feedback" banners would land in the daemon's stderr
    litellm.drop_params = True  # a provider that lacks e.g. tool_choice gets the call without it
    litellm.telemetry = False
    return litellm
