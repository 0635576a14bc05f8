"""The shared store: PostgreSQL through an asyncpg pool, for daemons that share state across machines.

Same seam as SQLite (``StoreCore``: one writer, group commit, publish after commit). A batch is one
transaction on one pooled connection: one ``executemany`` of upserts per table, then the events, numbered by
advancing the one-row ``event_clock`` (``UPDATE … RETURNING``) just before they are inserted and the commit.

That row's lock, held from the numbering to the commit, makes event numbers cluster-wide what they are on one
node: consecutive (a rolled-back batch gives its numbers back) and in commit order (a node that numbers after
another commits after it), so a reader that has seen ``seq`` N never later finds a smaller one appear. It is
taken last, so nodes serialize on it for three round trips (number, insert, commit), and a transaction holding
it never waits for another lock (no deadlock with the row locks the upserts take).

asyncpg rather than psycopg: about half the client CPU per group commit (notes/pg-driver.md).

A lost database is a pause, not a loss (:mod:`polpo.store.postgres_faults` says which errors are one): a
batch that failed before its COMMIT was sent is rolled back by the server and written again when it is back;
a batch whose COMMIT got no answer is *in doubt*, and is settled before anything else is written by reading
back the events it numbered (their numbers, node, time and names are its own): found, it was written and is
not written again; absent, it was not, and is. So no batch is dropped or written twice for an outage.

On a cluster node every batch is fenced (:mod:`polpo.store.fencing`): its BEGIN carries ``polpo_fence(...)``, so
a node whose lease the database no longer grants writes nothing (the batch fails with :class:`Fenced`).

The pool's release reset is a no-op (it saves a round trip per acquire), which is safe only because this store
never changes session state: no SET, no session-level advisory locks, no LISTEN on pooled connections. Its
sessions start with :func:`~polpo.store.fencing.session_settings`: one cut off in the middle of a transaction is
ended by the server, not kept with its locks until TCP gives up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import asyncpg

from polpo.clock import Clock
from polpo.config import StoreSettings
from polpo.events.catalog import Event
from polpo.store import rows as R
from polpo.store.core import StoreCore
from polpo.store.errors import StoreUnavailable
from polpo.store.fencing import Fence, session_settings
from polpo.store.named_reads import NamedReads, Select
from polpo.store.postgres_conn import PgTarget, target
from polpo.store.postgres_faults import is_outage
from polpo.store.postgres_schema import migrate
from polpo.store.protocol import StoreError
from polpo.store.prune import SqlPruning
from polpo.store.sql import statement

__all__ = ["EVENTS_CHANNEL", "InDoubt", "PostgresStore"]

log = logging.getLogger("polpo.store")

_NUMBER = "UPDATE event_clock SET seq = seq + $1 RETURNING seq"
_NOTIFY = "SELECT pg_notify($1, $2)"
_IDENTITY = "SELECT value FROM meta WHERE key = 'store_id'"
EVENTS_CHANNEL = "polpo_events"  # payload: the last seq of a committed batch
_INSERT_EVENT = ("INSERT INTO events (seq, ts, event, mission_id, task_id, data, node) "
                 "VALUES ($1, $2, $3, $4, $5, $6, $7)")


async def _keep_session(_conn: asyncpg.Connection[Any]) -> None:
    """The pool's reset on release: nothing to undo (see the module docstring)."""


def _no_nul(row: R.Row) -> R.Row:
    """PostgreSQL text cannot hold NUL (an agent's output can): each becomes U+FFFD."""
    if any(type(v) is str and "\x00" in v for v in row):
        return tuple(v.replace("\x00", "\ufffd") if type(v) is str else v for v in row)
    return row


@dataclass(frozen=True, slots=True)
class InDoubt:
    """A batch whose COMMIT was sent and not answered: the numbers it took and what its first and last events
    are (enough to tell them from any other node's or batch's); or, for a batch without events that adds to
    stored rows (:attr:`polpo.store.rows.Table.additive`), its transaction's id, whose fate PostgreSQL keeps."""

    first: int
    last: int
    marks: tuple[tuple[str, str, str | None, str | None, str | None], ...]
    xid: str | None = None

    @staticmethod
    def of(first: int, last: int, events: list[Event]) -> InDoubt:
        return InDoubt(first, last, tuple(_mark(ev) for ev in (events[0], events[-1])))


def _mark(ev: Event) -> tuple[str, str, str | None, str | None, str | None]:
    return (ev.ts, ev.event, ev.mission_id, ev.task_id, ev.node)


class PostgresStore(NamedReads, SqlPruning, StoreCore):
    identity_every = 5.0  # a query, not a stat: a dropped and recreated database is seen within seconds
    unavailable_advice = "start the PostgreSQL server or restore the way to it"
    ph = "$"  # (retention's statements: polpo.store.prune)

    def __init__(self, pool: asyncpg.Pool[Any], where: PgTarget, clock: Clock, max_seq: int, identity: str = "",
                 ) -> None:
        super().__init__(clock, max_seq, identity)
        self.pool = pool
        self.target = where
        self.in_doubt: InDoubt | None = None  # the batch whose COMMIT was not answered, until it is settled
        self.lease_fence: Fence | None = None  # a cluster node's: every batch is conditional on it (fencing.py)

    @classmethod
    async def open(cls, settings: StoreSettings, *, clock: Clock) -> PostgresStore:
        """Connect, migrate (under the schema lock) and return the store; StoreError names what failed."""
        t = target(settings)
        try:
            pool = await asyncpg.create_pool(t.url, password=t.password, min_size=1, max_size=settings.pool_size,
                                             reset=_keep_session, timeout=15,
                                             server_settings=session_settings(settings.lease.total_seconds()))
        except Exception as e:
            raise t.error("connect to", e) from None
        try:
            async with pool.acquire() as conn:
                await migrate(conn)
                max_seq = int(await conn.fetchval("SELECT COALESCE(MAX(seq), 0) FROM events"))
                identity = await conn.fetchval(_IDENTITY)
        except BaseException as e:
            await pool.close()
            if isinstance(e, StoreError) or not isinstance(e, Exception):
                raise
            raise t.error("migrate", e) from None
        return cls(pool, t, clock, max_seq, str(identity))

    @property
    def where(self) -> str:
        return f"PostgreSQL {self.target.where}"

    def away(self, exc: BaseException) -> bool:
        return isinstance(exc, StoreUnavailable) or is_outage(exc)  # refused, reset, a server restarting…

    async def _gone_now(self) -> str | None:
        """The identity row read again: another value, or none, is another database under the same name."""
        try:
            with anyio.fail_after(10):
                now = await self.pool.fetchval(_IDENTITY)
        except asyncpg.InvalidCatalogNameError:
            return "was dropped"
        except asyncpg.UndefinedTableError:
            return "was dropped and created again (the database there now has no polpo tables)"
        except Exception:  # unreachable for now: not a sign of another database (the writer waits for it)
            return None
        return None if now == self.identity else f"was replaced by another database (store {now})"

    async def _apply(self, rows: dict[R.Table, list[R.Row]], events: list[Event]) -> list[int]:
        try:
            if self.in_doubt is not None:
                written = await self._settle(self.in_doubt)
                self.in_doubt = None
                if written is not None:
                    return written
            return await self._write(rows, events)
        except Exception as e:
            if is_outage(e):  # the writer keeps the batch and tries again when the database is back
                await self.pool.expire_connections()
                raise StoreUnavailable(f"PostgreSQL: {type(e).__name__}: {e}") from e
            raise

    async def _settle(self, doubt: InDoubt) -> list[int] | None:
        """The numbers of the batch in doubt when it was committed after all, None when it was not."""
        if doubt.xid is not None:
            return await self._settle_xid(doubt.xid)
        found = await self.pool.fetch("SELECT ts, event, mission_id, task_id, node FROM events "
                                      "WHERE seq = $1 OR seq = $2 ORDER BY seq", doubt.first, doubt.last)
        marks = tuple(tuple(r) for r in found)
        if doubt.first == doubt.last:
            marks = marks * 2
        if marks == doubt.marks:
            log.warning("a batch whose commit was not answered (events %d–%d) was written; it is not written "
                        "again", doubt.first, doubt.last)
            return list(range(doubt.first, doubt.last + 1))
        return None

    async def _settle_xid(self, xid: str) -> list[int] | None:
        """[] when the transaction ``xid`` committed, None when it did not (it is written again)."""
        for _ in range(100):  # its session may still be ending on the server: "in progress" for a moment
            status = await self.pool.fetchval("SELECT pg_xact_status($1::text::xid8)", xid)
            if status != "in progress":
                break
            await anyio.sleep(0.05)
        else:
            raise StoreUnavailable(f"PostgreSQL: transaction {xid}, whose commit was not answered, is still in "
                                   "progress")  # the writer keeps the batch and asks again
        if status == "committed":
            log.warning("a batch whose commit was not answered (transaction %s) was written; it is not written "
                        "again", xid)
            return []
        return None

    async def _write(self, rows: dict[R.Table, list[R.Row]], events: list[Event]) -> list[int]:
        async with self.pool.acquire() as conn:
            if self.lease_fence is None:
                await conn.execute("BEGIN")
            else:  # BEGIN and the fence share a round trip; a lost leader lock: Deposed (core drops decisions)
                await self.lease_fence.begin(conn, deposed=True)
            try:
                xid = None if events or not any(t.additive for t in rows) else str(
                    await conn.fetchval("SELECT pg_current_xact_id()"))
                first, last = await self._statements(conn, rows, events)
            except BaseException:
                with contextlib.suppress(Exception):  # the server rolls back a transaction whose session ended
                    await conn.execute("ROLLBACK")
                raise
            self.in_doubt = InDoubt.of(first, last, events) if events else (
                None if xid is None else InDoubt(0, 0, (), xid))
            try:
                await conn.execute("COMMIT")
            except Exception as e:
                if not is_outage(e):
                    self.in_doubt = None  # an answer: the commit failed, nothing was written
                raise
            self.in_doubt = None
        return list(range(first, last + 1)) if events else []

    async def _statements(self, conn: Any, rows: dict[R.Table, list[R.Row]], events: list[Event]) -> tuple[int, int]:
        """Every statement of a batch but the COMMIT; the event numbers it took (0, 0 without events).

        A batch without events is rows only: upserts of whole states (one written twice in doubt is the same
        state), or rows that add (settled by the transaction's id, see :class:`InDoubt`)."""
        channels: list[str] = []
        for table, group in rows.items():
            sql, params = statement(table, group, "$")
            await conn.executemany(sql, [_no_nul(r) for r in params])
            if table.notify is not None and table.notify not in channels:
                channels.append(table.notify)
        for channel in channels:  # delivered at the commit (a task offered: idle nodes claim at once)
            await conn.execute(_NOTIFY, channel, "")
        if not events:
            return 0, 0
        last = int(await conn.fetchval(_NUMBER, len(events)))  # locks the clock until the commit
        first = last - len(events) + 1
        await conn.executemany(_INSERT_EVENT, [
            (first + i, ev.ts, ev.event, ev.mission_id, ev.task_id, ev.data_bytes().decode(), ev.node)
            for i, ev in enumerate(events)])
        await conn.execute(_NOTIFY, EVENTS_CHANNEL, str(last))  # followers read the new events (cluster)
        return first, last

    async def _close_backend(self) -> None:
        """asyncpg's close cancels the pool's upkeep and waits for it. A deadline landing in that moment (every
        timer fires at once when a SIGSTOPped node resumes) came back as the upkeep's own cancellation, which
        anyio cannot tell from a real one, and ended the daemon with a traceback (nemesis seed 1012). So the close
        runs in a task of its own that our cancellation cannot reach; cut short, the pool is terminated."""
        closing = asyncio.ensure_future(self.pool.close())
        closing.add_done_callback(lambda f: f.cancelled() or f.exception())  # (a terminated close's error: seen)
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            self.pool.terminate()
            raise

    # -- retention (polpo.store.prune): a pooled connection, short transactions; the space is autovacuum's to
    # reclaim, as PostgreSQL's operators expect (no VACUUM FULL, whose lock would stop every node)
    async def _prune_read(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        return await self._select_sql(sql, args)

    async def _prune_write(self, steps: Sequence[tuple[str, tuple[Any, ...]]]) -> list[list[dict[str, Any]]]:
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                return [[dict(r) for r in await conn.fetch(sql, *args)] for sql, args in steps]
        except Exception as e:
            if is_outage(e):
                await self.pool.expire_connections()
            raise

    async def reclaim(self, pages: int) -> int:
        return 0

    async def _select(self, q: Select, *args: Any) -> list[dict[str, Any]]:
        return await self._select_sql(q.sql("$"), args)

    async def _select_sql(self, sql: str, args: Sequence[Any]) -> list[dict[str, Any]]:
        try:
            return [dict(r) for r in await self.pool.fetch(sql, *args)]
        except Exception as e:
            if is_outage(e):  # the pool's connections outlived the server: the next reads get new ones
                await self.pool.expire_connections()
            raise
