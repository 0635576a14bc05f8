"""The ready queue: which pending task starts next, within concurrency limits.

Order is priority (higher first), then mission acceptance order, then file order. A task whose limit key (its
agent, its mission) is saturated is parked under that key, in a heap of its own. When a slot of the key frees,
one parked task — the best — goes back to the main heap: freeing a slot costs O(log n), not a re-park of every
waiting task (with an agent limit below the global one that re-park made dispatching quadratic). If the task
that was let out is then held by another of its limits, the slot it was let out for goes to the next one.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["ReadyQueue"]

Entry = tuple[float, int, int, str]  # (-priority, mission seq, task index, task id)


@dataclass
class ReadyQueue:
    global_limit: int
    _heap: list[Entry] = field(default_factory=list)
    _parked: defaultdict[str, list[Entry]] = field(default_factory=lambda: defaultdict(list))
    _let_out: dict[str, str] = field(default_factory=dict)  # task id → the key whose freed slot let it out
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
            origin = self._let_out.pop(task_id, None)
            if not is_ready(task_id):
                self._let_one_out(origin)  # the slot it was let out for is still free
                continue
            blocked = next((key for key, lim in limits_of(task_id)
                            if lim is not None and self.running[key] >= lim), None)
            if blocked is not None:
                heapq.heappush(self._parked[blocked], entry)
                if origin != blocked:
                    self._let_one_out(origin)
                continue
            return task_id
        return None

    def _let_one_out(self, key: str | None) -> None:
        if key is None:
            return
        parked = self._parked.get(key)
        if parked:
            entry = heapq.heappop(parked)
            self._let_out[entry[3]] = key
            heapq.heappush(self._heap, entry)
        if not parked:
            self._parked.pop(key, None)

    def unpark(self, which: Callable[[str], bool]) -> None:
        """Every task parked under a key ``which`` accepts goes back to the main heap (a limit that was 0)."""
        for key in [k for k in self._parked if which(k)]:
            for entry in self._parked.pop(key):
                heapq.heappush(self._heap, entry)

    def started(self, keys: Sequence[str]) -> None:
        self.running_total += 1
        for k in keys:
            self.running[k] += 1

    def finished(self, keys: Sequence[str]) -> None:
        """A key whose last run ended is dropped (a Counter reads it as 0): a key per mission would otherwise be
        kept for every mission ever run, as a schedule firing every second makes 86 400 a day."""
        self.running_total -= 1
        for k in keys:
            self.running[k] -= 1
            if not self.running[k]:
                del self.running[k]
            self._let_one_out(k)

    def __len__(self) -> int:
        return len(self._heap) + sum(len(v) for v in self._parked.values())
