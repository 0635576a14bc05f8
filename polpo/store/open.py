"""Open the store a config names (today: the embedded SQLite file in the state folder)."""

from __future__ import annotations

from polpo.clock import Clock
from polpo.config import Config
from polpo.store.sqlite import SqliteStore

__all__ = ["open_store"]


async def open_store(cfg: Config, clock: Clock) -> SqliteStore:
    return await SqliteStore.open(cfg.db_path, clock=clock)
