"""Progress lines for the terminal that started the daemon, written so they can never stall it.

A terminal that is paused (Ctrl-S, a pipe nobody reads, ``polpo daemon | less``) blocks ``write``. The
daemon's event loop must not wait for it, so lines go through a bounded queue to a writer thread; when the
queue is full, lines are dropped and counted, and the count is reported once the terminal drains. The
complete record is always ``events.jsonl``.
"""

from __future__ import annotations

import queue
import threading
from typing import TextIO

__all__ = ["ConsolePrinter"]

_STOP = object()


class ConsolePrinter:
    def __init__(self, stream: TextIO, *, capacity: int = 1000) -> None:
        self.stream = stream
        self.dropped = 0
        self._queue: queue.Queue[object] = queue.Queue(maxsize=capacity)
        self._thread = threading.Thread(target=self._run, name="polpo-console", daemon=True)
        self._thread.start()

    def print(self, line: str) -> None:
        """Queue ``line``; never blocks. Dropped (and counted) when the terminal is not keeping up."""
        try:
            self._queue.put_nowait(line)
        except queue.Full:
            self.dropped += 1

    def close(self, timeout: float = 2.0) -> None:
        """Flush what is queued (up to ``timeout`` seconds) and stop the writer thread."""
        try:
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)

    def _run(self) -> None:
        reported = 0
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            try:
                if self.dropped > reported:
                    self.stream.write(f"[console: {self.dropped - reported} lines dropped while the terminal "
                                      f"was not reading; events.jsonl has them all]\n")
                    reported = self.dropped
                self.stream.write(f"{item}\n")
                self.stream.flush()
            except (OSError, ValueError):  # closed terminal or pipe: keep draining so print() never blocks
                continue
