"""The CLI's synchronous view of a PostgreSQL store: the part of ``sqlite3.Connection`` that ``read.py`` and
``metrics.py`` use, over one asyncpg connection driven by a private event loop.

So the CLI's queries are written once (with ``?`` placeholders, numbered here) and ``polpo status`` pays for
one connection, not a pool, and no second (synchronous) driver. Each statement commits on its own.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any

import asyncpg

from polpo.config_paths import StoreSettingsLike
from polpo.store.errors import StoreError
from polpo.store.postgres_conn import PgTarget, target

__all__ = ["PgReadConnection", "connect"]

_MARK = re.compile(r"\?")


def numbered(sql: str) -> str:
    """``?`` placeholders as ``$1, $2, …`` (the CLI's SQL has no ``?`` inside literals)."""
    n = 0

    def sub(_: re.Match[str]) -> str:
        nonlocal n
        n += 1
        return f"${n}"

    return _MARK.sub(sub, sql)


class Rows:
    """What ``execute`` returns: iterable records (by name, position, or ``dict(row)``) and ``fetchone``."""

    def __init__(self, records: list[asyncpg.Record]) -> None:
        self._records = records

    def __iter__(self) -> Iterator[asyncpg.Record]:
        return iter(self._records)

    def fetchone(self) -> asyncpg.Record | None:
        return self._records[0] if self._records else None

    def fetchall(self) -> list[asyncpg.Record]:
        return list(self._records)


class PgReadConnection:
    def __init__(self, loop: asyncio.AbstractEventLoop, conn: asyncpg.Connection[Any], where: PgTarget) -> None:
        self._loop = loop
        self._conn = conn
        self._target = where

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> Rows:
        try:
            return Rows(self._loop.run_until_complete(self._conn.fetch(numbered(sql), *params)))
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as e:
            raise self._target.error("read", e) from None

    def __enter__(self) -> PgReadConnection:  # ``with con:`` — nothing to do: every statement commits itself
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        return None

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._loop.run_until_complete(self._conn.close(timeout=5))
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError):
            self._conn.terminate()
        finally:
            self._loop.close()


def connect(settings: StoreSettingsLike) -> PgReadConnection:
    """One connection to the store. A database no daemon has set up yet raises ``LookupError``."""
    t = target(settings)
    loop = asyncio.new_event_loop()
    try:
        conn = loop.run_until_complete(asyncpg.connect(t.url, password=t.password, timeout=15))
    except Exception as e:
        loop.close()
        raise t.error("connect to", e) from None
    con = PgReadConnection(loop, conn, t)
    try:
        exists = con.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
    except StoreError:
        con.close()
        raise
    if not (exists and exists[0]):
        con.close()
        raise LookupError(f"no polpo state in the PostgreSQL database at {t.where} yet: start the daemon first")
    return con
