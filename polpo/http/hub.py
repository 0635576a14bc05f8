"""Live events for HTTP clients: one store subscriber fans each committed event out to every listener.

The store calls :meth:`EventHub.publish` on its writer's path, so it only appends to each listener's bounded
buffer and wakes it: serialising and sending happen in the listener's own request task. A listener that falls
``capacity`` events behind is marked ``overflowed`` instead of slowing anyone: it catches up from the stored
events (the ``events`` table is the record), then goes on live.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable

import anyio
import orjson

from polpo.events.catalog import Event

__all__ = ["EventHub", "Listener", "event_line"]


def event_line(seq: int, ts: str, name: str, mission_id: str | None, task_id: str | None, data: bytes | str,
               node: str | None = None) -> bytes:
    """One event as the JSON object of ``events.jsonl`` (``data`` is already JSON and embedded as is)."""
    line: dict[str, object] = {"seq": seq, "ts": ts, "event": name}
    if mission_id is not None:
        line["missionId"] = mission_id
    if task_id is not None:
        line["taskId"] = task_id
    if node is not None:
        line["node"] = node
    line["data"] = orjson.Fragment(data)
    return orjson.dumps(line)


class Listener:
    def __init__(self, hub: EventHub, match: Callable[[Event], bool] | None, capacity: int) -> None:
        self.hub = hub
        self.match = match
        self.capacity = capacity
        self.buffer: deque[Event] = deque()
        self.overflowed = False
        self._wake = anyio.Event()

    def offer(self, ev: Event) -> None:
        if self.match is not None and not self.match(ev):
            return
        if len(self.buffer) >= self.capacity:
            self.overflowed = True
            self.buffer.clear()
        else:
            self.buffer.append(ev)
        self._wake.set()

    def take(self) -> list[Event]:
        out = list(self.buffer)
        self.buffer.clear()
        return out

    async def wait(self, seconds: float) -> None:
        """Until an event (or an overflow, or the hub closing) arrives, or ``seconds`` pass."""
        if self.buffer or self.overflowed or self.hub.closed:
            return
        self._wake = anyio.Event()
        with anyio.move_on_after(seconds):
            await self._wake.wait()

    def wake(self) -> None:
        self._wake.set()

    async def first(self, seconds: float) -> Event | None:
        """The first matching event (buffered or to come), or None after ``seconds``."""
        with anyio.move_on_after(seconds):
            while not self.hub.closed:
                got = self.take()
                if got:
                    return got[0]
                await self.wait(seconds)
        return None

    def close(self) -> None:
        self.hub.listeners.discard(self)


VERSIONS = 4096  # missions whose latest event the hub remembers (the others share one version: see version())


class EventHub:
    def __init__(self, versions: int = VERSIONS) -> None:
        self.listeners: set[Listener] = set()
        self.closed = False
        self._seq: OrderedDict[str, int] = OrderedDict()  # the latest event of the missions seen last
        self._versions = versions
        self._forgotten = 0  # the newest event of a mission no longer remembered

    def version(self, mission_id: str) -> int:
        """A number that changes whenever an event of the mission arrives (a version for cached answers). Only the
        missions seen last are remembered, so a year of missions costs no more than an hour's: any other mission
        answers the newest forgotten event's number, which is never older than its own last event."""
        return self._seq.get(mission_id, self._forgotten)

    def publish(self, ev: Event) -> None:
        if ev.mission_id is not None:
            self._seq[ev.mission_id] = ev.seq
            self._seq.move_to_end(ev.mission_id)
            if len(self._seq) > self._versions:
                self._forgotten = max(self._forgotten, self._seq.popitem(last=False)[1])
        for listener in tuple(self.listeners):
            listener.offer(ev)

    def listen(self, match: Callable[[Event], bool] | None = None, capacity: int = 10_000) -> Listener:
        listener = Listener(self, match, capacity)
        self.listeners.add(listener)
        return listener

    def close(self) -> None:
        """The daemon stops: every listener wakes and ends its stream."""
        self.closed = True
        for listener in tuple(self.listeners):
            listener.wake()
