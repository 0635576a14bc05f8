"""Open the store a config names: SQLite in the state folder by default, PostgreSQL when ``[store] url`` is set."""

from __future__ import annotations

from polpo.clock import Clock
from polpo.config import Config
from polpo.extras import require
from polpo.store.protocol import Store

__all__ = ["open_store"]


async def open_store(cfg: Config, clock: Clock) -> Store:
    if cfg.store.url is not None:
        require("postgres", "[store] url")
        from polpo.store.postgres import PostgresStore  # asyncpg is an optional extra: imported only here

        return await PostgresStore.open(cfg.store, clock=clock)
    from polpo.store.sqlite import SqliteStore

    return await SqliteStore.open(cfg.db_path, clock=clock)
