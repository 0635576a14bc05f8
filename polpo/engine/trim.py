"""Give freed heap memory back to the system (glibc's ``malloc_trim``) after a mission is admitted or ends.

glibc keeps freed heap pages for reuse, so the garbage of checking and admitting a mission of 10 000 tasks, and a
finished mission's records, stayed in the daemon's RSS. ``malloc_trim(0)`` returns the free pages (ms). Trimming
after each admission lowered the peak of five 10 000-task missions dropped at once by about 10 MB
(scripts/bench_memory.py). Without glibc (musl, macOS) this does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
from collections.abc import Callable

__all__ = ["trim", "trim_soon"]

LATER = 1.0  # seconds: by then the frames that finished a mission have let go of it


_UNSET: object = object()
_fn: object = _UNSET


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` from the process's own symbols (no library search), looked up once."""
    global _fn
    if _fn is _UNSET:
        try:
            fn = getattr(ctypes.CDLL(None), "malloc_trim", None)
        except OSError:
            fn = None
        if fn is not None:
            fn.argtypes = [ctypes.c_size_t]
            fn.restype = ctypes.c_int
        _fn = fn
    return _fn  # type: ignore[return-value]


def trim() -> bool:
    """Return the heap's free pages to the system; False where there is no ``malloc_trim``."""
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True


_scheduled: asyncio.TimerHandle | None = None


def trim_soon() -> None:
    """:func:`trim` a moment later, on the event loop (now, without one); calls meanwhile share that trim."""
    global _scheduled
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        trim()
        return
    if _scheduled is not None and not _scheduled.cancelled() and _scheduled.when() > loop.time():
        return

    def run() -> None:
        global _scheduled
        _scheduled = None
        trim()

    _scheduled = loop.call_later(LATER, run)
