"""``[notify] digest``: what waits for a person, as one ``attention:digest`` event a notify rule routes to a channel.

The leader's timer (the SLA monitor's interval job, :class:`polpo.sla.monitor.SlaMonitor`, on the injected clock)
reads the list every ``digest`` and, when anything waits, stores the event; nothing is sent when nothing waits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from polpo.attention.items import Item
from polpo.attention.read import waiting
from polpo.events.catalog import AttentionDigest
from polpo.store.protocol import Store
from polpo.store.read import Conn

__all__ = ["Digest", "digest_items"]

Reader = Callable[[Callable[[Conn], list[Item]]], Awaitable[list[Item]]]


def digest_items(items: list[Item]) -> list[dict[str, Any]]:
    """What a channel gets of each item: what it is, what to do and the commands (no web buttons)."""
    return [{"kind": i.kind, "state": i.state, "target": i.target, "title": i.title, "todo": i.todo,
             "commands": list(i.commands), "since": i.since} for i in items]


class Digest:
    def __init__(self, store: Store, read: Reader) -> None:
        self.store = store
        self.read = read  # the daemon's reader pool's run: the list is read off the event loop

    async def tick(self, now: datetime) -> None:
        items = await self.read(waiting)
        if items:
            self.store.submit(self.store.tx().event(AttentionDigest(count=len(items), items=digest_items(items))))
