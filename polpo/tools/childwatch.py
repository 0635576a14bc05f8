"""Wait for children in the event loop (pidfd) instead of one thread per child.

asyncio 3.11 watches each subprocess with a thread of its own (``ThreadedChildWatcher``): a thread start, a
waitpid and a hand-off back to the loop per agent and per check. On Linux ≥ 5.3 a pidfd becomes readable when the
child exits, so the loop itself can wait for it. The daemon installs this for its lifetime and puts the previous
watcher back when it stops (tests run many loops in one process).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import warnings
from collections.abc import Iterator

__all__ = ["pidfd_child_watcher"]


def _pidfd_works() -> bool:
    if not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


@contextlib.contextmanager
def pidfd_child_watcher() -> Iterator[bool]:
    """Within the block, children of the running loop are waited for through pidfds (yields whether it could)."""
    if not _pidfd_works():
        yield False
        return
    loop = asyncio.get_running_loop()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # child watchers are deprecated from 3.12 on
        previous = asyncio.get_child_watcher()
        watcher = asyncio.PidfdChildWatcher()
        watcher.attach_loop(loop)
        asyncio.set_child_watcher(watcher)
    try:
        yield True
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            asyncio.set_child_watcher(previous)
        watcher.close()
