"""The embedded store: SQLite in WAL mode, one writing connection and one aiosqlite connection for reads.

A batch is one ``BEGIN IMMEDIATE … COMMIT`` with one ``executemany`` per table, written on the event loop's own
thread: a commit of a few rows (WAL, ``synchronous=NORMAL``: no fsync) takes tens of microseconds, less than the
hand-off to a thread and back, which was most of the store's cost per task. What could make the loop wait is
moved off it: the writer connection never checkpoints on its own (``wal_autocheckpoint=0``; the reading connection
checkpoints every :data:`CHECKPOINT_EVERY` commits, in its thread), and it does not wait for a lock
(``busy_timeout=0``): when another process holds the write lock (a CLI command queued in the inbox), the batch
is written in a worker thread that waits the usual ``busy_timeout``. The daemon's few reads (start-up, resumed
checks, the command inbox) use the aiosqlite connection; the CLI reads the same file with connections of its own
(:mod:`polpo.store.read`), which WAL allows beside the writer.

The database file is watched (:mod:`polpo.store.identity`): its device and inode are taken at open, and a path
that no longer leads to them (deleted, or another file moved over it) stops the writer before its next commit.
A ``stat`` of the path, not an ``fstat`` of a descriptor of our own: closing a second descriptor of the file would
drop the POSIX locks SQLite holds on it. The data only the daemon still holds then (the unlinked file and its
WAL) is copied beside the path as ``polpo.db.rescued-<time>`` when the store closes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite
import anyio.to_thread
import orjson

from polpo.clock import Clock
from polpo.events.catalog import Event
from polpo.store import rows as R
from polpo.store.core import StoreCore
from polpo.store.errors import StoreUnavailable
from polpo.store.named_reads import NamedReads, Select
from polpo.store.protocol import StoreError
from polpo.store.prune import SqlPruning
from polpo.store.schema import MIGRATIONS, PRAGMAS, SCHEMA_VERSION
from polpo.store.sql import statement

__all__ = ["CHECKPOINT_EVERY", "SqliteStore", "migrate"]

_T = TypeVar("_T")

log = logging.getLogger("polpo.store")

CHECKPOINT_EVERY = 200
"""Commits between two checkpoints of the WAL into the database file (off the loop, see the module docstring)."""
WAIT_FOR_LOCK_MS = 5000  # the wait of a batch written in a thread when another process held the write lock


class SqliteStore(NamedReads, SqlPruning, StoreCore):
    def __init__(self, db: aiosqlite.Connection, path: Path, clock: Clock, max_seq: int, identity: str = "") -> None:
        super().__init__(clock, max_seq, identity)
        self.db = db
        self.path = path
        self.writer = _writer(path)
        self._file = _file_id(path)  # what the path led to at open (device, inode)
        self._since_checkpoint = 0
        self._pruner: sqlite3.Connection | None = None  # retention's own connection (polpo.store.prune)
        self._reader: sqlite3.Connection | None = None  # the loop's, for a read an index answers (_quick)

    @classmethod
    async def open(cls, path: Path, *, clock: Clock) -> SqliteStore:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = await aiosqlite.connect(path, isolation_level=None)
        try:  # closed on any failure: its thread left running would keep the process from exiting
            db.row_factory = aiosqlite.Row
            await _new_file_vacuums_incrementally(db)
            for pragma in PRAGMAS:
                await db.execute(pragma)
            await migrate(db)
            await _convert_when_cheap(db, path)
            async with db.execute("SELECT COALESCE(MAX(seq), 0) FROM events") as cur:
                row = await cur.fetchone()
            async with db.execute("SELECT value FROM meta WHERE key = 'store_id'") as cur:
                ident = await cur.fetchone()
            if ident is None:
                raise StoreError(f"the state database {path} has no identity (table meta, key store_id); restore "
                                 "it from a copy or point state_dir elsewhere")
            return cls(db, path, clock, int(row[0]) if row else 0, str(ident[0]))
        except BaseException as e:
            with anyio.CancelScope(shield=True):
                await db.close()
            if isinstance(e, sqlite3.DatabaseError) and _name(e) == "SQLITE_NOTADB":
                raise StoreError(f"the state database {path} is not a SQLite database ({e}): restore it from a "
                                 "copy, or move it aside to start with an empty state") from e
            raise

    @property
    def where(self) -> str:
        return str(self.path)

    def _gone(self) -> str | None:
        try:
            now = _file_id(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return "was deleted"
        except OSError:  # cannot tell (a folder made unreadable): not a reason to stop
            return None
        return None if now == self._file else "was replaced by another file"

    def _rescue(self) -> None:
        """Copy what the lost database held (the writer still reads it, WAL included) beside its path."""
        stem = f"{self.path.name}.rescued-{self.clock.now().strftime('%Y%m%dT%H%M%SZ')}"
        target, n = self.path.with_name(stem), 1
        while target.exists():  # never over an earlier copy
            n += 1
            target = self.path.with_name(f"{stem}-{n}")
        try:
            with contextlib.closing(sqlite3.connect(target)) as copy:
                self.writer.backup(copy)
        except (sqlite3.Error, OSError) as e:
            log.error("could not save a copy of the lost database as %s: %s", target, e)
            return
        self.rescued = target

    async def _apply(self, rows: dict[R.Table, list[R.Row]], events: list[Event]) -> None:
        if events:
            rows = {**rows, R.EVENTS: [(ev.seq, ev.ts, ev.event, ev.mission_id, ev.task_id,
                                        ev.data_bytes().decode(), ev.node) for ev in events]}
        work = [statement(table, group) for table, group in rows.items()]
        with self._passing_faults():
            try:
                _write_batch(self.writer, work)
            except sqlite3.OperationalError as e:
                if _name(e) not in ("SQLITE_BUSY", "SQLITE_LOCKED"):
                    raise
                await anyio.to_thread.run_sync(_write_waiting, self.writer, work)  # another process holds the lock
        self._since_checkpoint += 1
        if self._since_checkpoint >= CHECKPOINT_EVERY:
            self._since_checkpoint = 0
            with contextlib.suppress(sqlite3.Error):  # a busy reader only delays it; the next one tries again
                await self.db.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _quick(self) -> sqlite3.Connection:
        """The loop's own reading connection, for a read an index answers (:attr:`Select.quick`): it never writes, so it
        never waits for the write lock (``busy_timeout`` 0 all the same)."""
        if self._reader is None:
            self._reader = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=0)
            self._reader.row_factory = sqlite3.Row
            self._reader.execute("PRAGMA query_only=ON")
        return self._reader

    # -- retention (polpo.store.prune): its own connection, in a worker thread, so the loop and the writer's
    # connection never wait for it; a batch the writer meets while a removal holds the lock is written in a thread
    def _pruning(self) -> sqlite3.Connection:
        if self._pruner is None:
            self._pruner = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                           timeout=WAIT_FOR_LOCK_MS / 1000)
            self._pruner.row_factory = sqlite3.Row
        return self._pruner

    async def _in_pruning(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """``work`` on the pruning connection, in a worker thread. A SQLite fault drops the connection (the next
        pass opens another, not one a failed rollback left in a transaction) and, when it may pass (a full disk),
        is StoreUnavailable: the pass ends with one line and the next one tries again."""
        def run() -> _T:
            try:
                return work(self._pruning())
            except sqlite3.Error:
                con, self._pruner = self._pruner, None
                _close_quietly(con)
                raise
        with self._passing_faults():
            return await anyio.to_thread.run_sync(run)

    async def _prune_read(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        return await self._in_pruning(lambda con: [dict(r) for r in con.execute(sql, _args(args))])

    async def _prune_write(self, steps: Sequence[tuple[str, tuple[Any, ...]]]) -> list[list[dict[str, Any]]]:
        def write(con: sqlite3.Connection) -> list[list[dict[str, Any]]]:
            con.execute("BEGIN IMMEDIATE")
            try:
                out = [[dict(r) for r in con.execute(sql, _args(args))] for sql, args in steps]
                con.commit()
            except BaseException:
                con.rollback()
                raise
            return out
        return await self._in_pruning(write)

    async def reclaim(self, pages: int) -> int:
        """Give up to ``pages`` free pages back to the file system (``PRAGMA incremental_vacuum``); how many went.
        A file made before incremental vacuuming keeps its size: its free pages are reused (see
        :func:`_new_file_vacuums_incrementally`)."""
        def vacuum(con: sqlite3.Connection) -> int:
            if int(con.execute("PRAGMA auto_vacuum").fetchone()[0]) != 2:
                return 0
            before = int(con.execute("PRAGMA freelist_count").fetchone()[0])
            con.executescript(f"PRAGMA incremental_vacuum({int(pages)})")  # (execute steps it one page only)
            con.execute("PRAGMA wal_checkpoint(PASSIVE)")
            return before - int(con.execute("PRAGMA freelist_count").fetchone()[0])
        return await self._in_pruning(vacuum)

    async def _close_backend(self) -> None:
        if self.lost is not None:
            self._rescue()
        for con in (self._pruner, self._reader):
            if con is not None:
                con.close()
        try:
            self.writer.close()
            with contextlib.suppress(sqlite3.OperationalError):  # best effort: a reader may still hold the table
                await self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            await self.db.close()

    async def _select(self, q: Select, *args: Any) -> list[dict[str, Any]]:
        with self._passing_faults():  # a full disk, an I/O error: the reader waits it out (Store.away)
            if q.quick:  # an index's few rows, on the loop: tens of microseconds, less than the hop to a thread
                try:
                    return [dict(r) for r in self._quick().execute(q.sql("?"), _args(args))]
                except sqlite3.OperationalError as e:  # (busy: WAL recovery, a checkpoint that resets the log)
                    if _name(e) not in ("SQLITE_BUSY", "SQLITE_LOCKED"):  # wait for it on the reading connection,
                        self._drop_quick()  # off the loop; a connection that met a fault is opened anew
                        raise
            return [dict(r) for r in await self.db.execute_fetchall(q.sql("?"), _args(args))]  # one hop

    @contextlib.contextmanager
    def _passing_faults(self) -> Iterator[None]:
        """A SQLite fault that may pass (:data:`_PASSING`) as StoreUnavailable: the writer keeps its batch and tries
        again, a reader waits (``Store.away``); neither decides on it nor ends the daemon."""
        try:
            yield
        except sqlite3.Error as e:
            if _name(e).startswith(_PASSING):
                raise StoreUnavailable(f"{self.path}: {e}") from e
            raise

    def _drop_quick(self) -> None:
        con, self._reader = self._reader, None
        _close_quietly(con)


# SQLite errors that may pass without a change to polpo: space, permissions, I/O, another process's lock
_PASSING = ("SQLITE_FULL", "SQLITE_IOERR", "SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_BUSY", "SQLITE_LOCKED",
            "SQLITE_PERM")


def _close_quietly(con: sqlite3.Connection | None) -> None:
    """Close a connection dropped after a fault (closing it may fail the same way)."""
    if con is not None:
        with contextlib.suppress(sqlite3.Error):
            con.close()


def _args(args: Sequence[Any]) -> tuple[Any, ...]:
    """A list argument as the JSON array ``json_each(?)`` reads (SQLite has no arrays)."""
    return tuple(orjson.dumps(a).decode() if type(a) is list else a for a in args)


def _file_id(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _writer(path: Path) -> sqlite3.Connection:
    """The writing connection (see the module docstring); used by one writer at a time, from either thread."""
    con = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        for pragma in PRAGMAS:
            con.execute(pragma)
        con.execute("PRAGMA busy_timeout=0")
        con.execute("PRAGMA wal_autocheckpoint=0")
    except BaseException:
        con.close()
        raise
    return con


def _name(e: sqlite3.Error) -> str:
    return str(getattr(e, "sqlite_errorname", ""))


def _write_waiting(con: sqlite3.Connection, work: list[tuple[str, Any]]) -> None:
    """In a worker thread: the batch, waiting up to :data:`WAIT_FOR_LOCK_MS` for another process's lock."""
    con.execute(f"PRAGMA busy_timeout={WAIT_FOR_LOCK_MS}")
    try:
        _write_batch(con, work)
    finally:
        con.execute("PRAGMA busy_timeout=0")


def _write_batch(con: sqlite3.Connection, work: list[tuple[str, Any]]) -> None:
    """The batch in one transaction, all or nothing."""
    con.execute("BEGIN IMMEDIATE")
    try:
        for sql, params in work:
            con.executemany(sql, params)
        con.commit()
    except BaseException:
        con.rollback()
        raise


async def _one(db: aiosqlite.Connection, sql: str) -> int:
    async with db.execute(sql) as cur:
        row = await cur.fetchone()
    return int(row[0]) if row is not None else 0


async def _new_file_vacuums_incrementally(db: aiosqlite.Connection) -> None:
    """A new database gives the pages retention frees back to the file system bit by bit (``PRAGMA
    incremental_vacuum``, polpo.store.prune). It must be said before anything is written, WAL mode included;
    an older file keeps its mode until a whole VACUUM converts it (:func:`_convert_when_cheap`)."""
    if await _one(db, "PRAGMA user_version") == 0 and await _one(db, "SELECT COUNT(*) FROM sqlite_master") == 0:
        await db.execute("PRAGMA auto_vacuum=INCREMENTAL")


async def _convert_when_cheap(db: aiosqlite.Connection, path: Path) -> None:
    """A database made before incremental vacuuming, more than half of it free (retention removed most of it): one
    VACUUM converts it, copying only what is kept, before the daemon serves (after that, pages go back as they
    are freed). A file that is still mostly in use keeps its mode: its free pages are reused."""
    if await _one(db, "PRAGMA auto_vacuum") != 0:
        return
    free, pages = await _one(db, "PRAGMA freelist_count"), await _one(db, "PRAGMA page_count")
    if pages < 256 or free * 2 <= pages:
        return
    started = time.monotonic()
    await db.execute("PRAGMA auto_vacuum=INCREMENTAL")
    await db.execute("VACUUM")
    log.warning("%s: converted to incremental vacuuming in %.1f s (%d of its %d pages were free)", path,
                time.monotonic() - started, free, pages)


async def migrate(db: aiosqlite.Connection) -> int:
    async with db.execute("PRAGMA user_version") as cur:
        row = await cur.fetchone()
    version = int(row[0]) if row else 0
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"the state database is schema version {version}, newer than this polpo ({SCHEMA_VERSION}); "
            "upgrade polpo or point state_dir elsewhere"
        )
    if version == SCHEMA_VERSION:
        return version
    await db.execute("BEGIN IMMEDIATE")
    try:
        for v in range(version, SCHEMA_VERSION):
            for stmt in MIGRATIONS[v].split(";"):
                if stmt.strip():
                    await db.execute(stmt)
        # the store's identity, once, with the table (v6): polpo.store.identity
        await db.execute("INSERT INTO meta (key, value) VALUES ('store_id', ?) ON CONFLICT (key) DO NOTHING",
                         (str(uuid.uuid4()),))
        await db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        await db.commit()
    except BaseException:
        await db.rollback()
        raise
    return SCHEMA_VERSION
