"""The ready queue: which pending task starts next, within concurrency limits.

Order is priority (higher first), then mission acceptance order, then file order. A task whose limit key
(its agent, its mission) is saturated is parked under that key and comes back when a slot frees, so the
cost per dispatch is O(log n), not a scan of every waiting task.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

Entry = tuple[float, int, int, str]  # (-priority, mission seq, task index, task id)


@dataclass
class ReadyQueue:
    global_limit: int
    _heap: list[Entry] = field(default_factory=list)
    _parked: defaultdict[str, list[Entry]] = field(default_factory=lambda: defaultdict(list))
    running: Counter[str] = field(default_factory=Counter)
    running_total: int = 0

    def push(self, priority: float, mission_seq: int, idx: int, task_id: str) -> None:
        heapq.heappush(self._heap, (-priority, mission_seq, idx, task_id))

    def pop_startable(self, is_ready: Callable[[str], bool],
                      limits_of: Callable[[str], Sequence[tuple[str, int | None]]]) -> str | None:
        """The next task that may start now, or None. Stale entries (no longer ready) are dropped."""
        while self._heap and self.running_total < self.global_limit:
            entry = heapq.heappop(self._heap)
            task_id = entry[3]
            if not is_ready(task_id):
                continue
            blocked = next((key for key, lim in limits_of(task_id)
                            if lim is not None and self.running[key] >= lim), None)
            if blocked is not None:
                self._parked[blocked].append(entry)
                continue
            return task_id
        return None

    def started(self, keys: Sequence[str]) -> None:
        self.running_total += 1
        for k in keys:
            self.running[k] += 1

    def finished(self, keys: Sequence[str]) -> None:
        self.running_total -= 1
        for k in keys:
            self.running[k] -= 1
            for entry in self._parked.pop(k, ()):
                heapq.heappush(self._heap, entry)

    def __len__(self) -> int:
        return len(self._heap) + sum(len(v) for v in self._parked.values())
