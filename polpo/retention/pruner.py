"""Retention in the background: passes that remove, in small transactions, what ``[retention]`` keeps no longer.

A pass (at start-up, then every ``interval``) removes a batch of missions at a time (:mod:`polpo.store.prune`:
every row of theirs, in one short transaction, only if still finished), each batch written first to the export
file when one is set (appended, flushed and synced: what is removed is never lost before it is written), then
their workspaces in the state folder; then the events of no kept mission, the leftovers and the records of files
that are gone; then gives the freed pages back (SQLite's incremental vacuum). It rests between batches as long
as the batch took, so the engine and its writer always get the store in between; a pass never holds the
daemon's writer, and a mission on the board (running, or brought back by a retry) is never a candidate.

Kept whatever their age: missions still open, missions a person gave a verdict on (``keep_labelled``: they are
the judge's calibration labels, with the assessments, reviews and dimensions a label is read from), the spend of
open missions and of the current day (budgets), the record of a file still in the folder (so its bytes never run
again), and the newest event.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path

import anyio
import orjson

from polpo.clock import Clock, iso
from polpo.config import Config
from polpo.events.catalog import RetentionPruned
from polpo.retention.plan import FAR_FUTURE, cutoffs, owned_workspace, pause_after
from polpo.store.errors import StoreUnavailable
from polpo.store.protocol import Store

__all__ = ["EVENT_WINDOW", "Pruner", "run_once"]

log = logging.getLogger("polpo.retention")

EVENT_WINDOW = 5000  # events looked at per transaction
RECLAIM_PAGES = 2048  # pages (4 KiB) given back per step


class Pruner:
    def __init__(self, cfg: Config, store: Store, clock: Clock, *, live: Callable[[str], bool] = lambda _m: False,
                 schedule_sources: Callable[[], Sequence[str]] = lambda: ()) -> None:
        self.cfg = cfg
        self.settings = cfg.retention
        self.store = store
        self.clock = clock
        self.live = live  # a mission on the board: never removed
        self.schedule_sources = schedule_sources
        self._event_cursor = 0  # where the events were looked at up to (this run)
        self._source_cursor = ("", "")  # (seen_at, path) of the last file record looked at (this run)
        self.rest: Callable[[float], float] = pause_after  # seconds to rest after a batch that took so long

    async def run(self) -> None:
        """A pass now, then one every ``interval``, until cancelled; a pass that fails is logged and tried later."""
        while True:
            try:
                await self.pass_once()
            except StoreUnavailable as e:  # a full disk, say: what it removed so far stays removed
                log.warning("a retention pass stopped: the store cannot be written now (%s); the next one tries "
                            "again", e)
            except Exception:
                log.exception("a retention pass failed; the next one tries again")
            await anyio.sleep(self.settings.interval.total_seconds())

    async def pass_once(self, *, until_done: bool = True) -> int:
        """One pass; how many missions it removed. It ends when nothing more is due (``until_done``) or after one
        batch of each kind."""
        started = time.perf_counter()
        s = self.settings
        cut = cutoffs(self.clock.now(), s.finished)
        missions = events = records = 0
        if s.schedule_runs is not None:
            for source in self.schedule_sources():
                missions += await self._missions(partial(self.store.schedule_runs_beyond, source, s.schedule_runs,
                                                         s.batch, s.keep_labelled), FAR_FUTURE, until_done)
        if cut is not None:
            missions += await self._missions(partial(self.store.prune_candidates, cut.before, s.batch, s.keep_labelled),
                                             cut.before, until_done)
            events = await self._events(cut.before, until_done)
            records = await self.store.prune_leftovers(cut.before, cut.day) + await self._sources(cut.before)
        if missions or events or records:
            await self._reclaim()
            took = round(time.perf_counter() - started, 3)
            exported = str(s.export) if s.export is not None and missions else None
            await self.store.commit(self.store.tx().event(RetentionPruned(
                missions=missions, events=events, records=records, exported=exported, seconds=took)))
        return missions

    async def _missions(self, find: Callable[[], Awaitable[list[str]]], before: str, until_done: bool) -> int:
        removed = 0
        while True:
            t0 = time.perf_counter()
            found = await find()
            ids = [mid for mid in found if not self.live(mid)]
            if not ids:
                return removed
            if self.settings.export is not None:
                await self._export(ids)
            pruned = await self.store.prune_missions(ids, before)
            removed += len(pruned)
            gone = [p for mission in pruned if (p := owned_workspace(mission.workspace, self.cfg.state_dir))]
            if gone:
                await anyio.to_thread.run_sync(_remove_folders, gone)
            if not pruned or not until_done:
                return removed
            await anyio.sleep(self.rest(time.perf_counter() - t0))

    async def _export(self, ids: list[str]) -> None:
        """Every row of each mission as one JSON line, appended and synced before anything is removed."""
        rows = await self.store.export_missions(ids)
        at = iso(self.clock.now())
        lines = b"".join(orjson.dumps({"mission": mid, "removedAt": at, "rows": rows[mid]}) + b"\n" for mid in ids)
        path = self.settings.export
        assert path is not None

        def append() -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "ab") as f:
                f.write(lines)
                f.flush()
                os.fsync(f.fileno())
        await anyio.to_thread.run_sync(append)

    async def _events(self, before: str, until_done: bool) -> int:
        removed = 0
        while True:
            t0 = time.perf_counter()
            n, nxt = await self.store.prune_events(self._event_cursor, before, EVENT_WINDOW)
            removed += n
            if nxt is None:
                return removed
            self._event_cursor = nxt
            if not until_done:
                return removed
            await anyio.sleep(self.rest(time.perf_counter() - t0))

    async def _sources(self, before: str) -> int:
        """The records of files that are gone, seen before ``before``, that no mission or schedule needs."""
        removed = 0
        while rows := await self.store.old_sources(self._source_cursor, before, 500):
            self._source_cursor = (rows[-1][1], rows[-1][0])
            gone = await anyio.to_thread.run_sync(lambda: [p for p, _ in rows if not os.path.lexists(p)])
            removed += await self.store.prune_sources(gone)
        return removed

    async def _reclaim(self) -> None:
        while True:
            t0 = time.perf_counter()
            if await self.store.reclaim(RECLAIM_PAGES) < RECLAIM_PAGES:
                return
            await anyio.sleep(self.rest(time.perf_counter() - t0))


def _remove_folders(paths: list[Path]) -> None:
    for p in paths:
        shutil.rmtree(p, ignore_errors=True)


async def run_once(cfg: Config, store: Store, clock: Clock, *, until_done: bool = True) -> int:
    """A pass on a store (for tools and benchmarks: no engine, so no mission is live); missions removed."""
    pruner = Pruner(cfg, store, clock)
    pruner.rest = lambda _took: 0.0  # nothing else uses the store
    return await pruner.pass_once(until_done=until_done)
