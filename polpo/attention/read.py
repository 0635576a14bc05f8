"""The attention list read from a store (the CLI's and the API's; the sources themselves stay pure)."""

from __future__ import annotations

from polpo.attention.items import Item, gather
from polpo.attention.sources import SOURCES
from polpo.store import attention_read
from polpo.store.read import Conn

__all__ = ["waiting"]


def waiting(con: Conn) -> list[Item]:
    """What waits for a person now, most urgent kinds first."""
    return gather(attention_read.rows(con), SOURCES)
