"""The missions folder: a start-up scan, then its events (:mod:`polpo.intake.folder_events`: inotify, else
watchfiles), each file settled before it is read.

Only ``*.json`` names directly in the folder count; dot-files and temp files (``.x.json.tmp``, ``*.part`` …)
are ignored, so writers that use temp-file + rename (``polpo submit`` does) are seen once, whole. How a file is
read once its writer is done is :mod:`polpo.intake.settle`'s. A fault that passes by itself while a file is read
or handled (:mod:`polpo.fsfaults`) is waited out with a backoff and the file tried again; nothing is stored for it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Protocol

import anyio

from polpo.fsfaults import INPUT_PASSING, Pause, errno_in, errno_name, passing
from polpo.intake.folder_events import FolderGone, folder_events
from polpo.intake.settle import DEFAULT_MAX_BYTES, Content, file_key, file_stat, settled
from polpo.intake.stamps import settled_stamp, stamp_of

log = logging.getLogger("polpo.intake")

IGNORED_SUFFIXES = (".tmp", ".part", ".partial", ".swp", ".swx", "~", ".crdownload")
WATCH_RESTART_DELAY = 0.5  # after the watcher failed, before it watches (and scans) again

Handler = Callable[[Path, Content, str | None], Awaitable[object]]  # (path, bytes, stamp of what was read)
Unchanged = Callable[[dict[Path, str]], Awaitable[set[Path]]]
"""Of these files (with their stamps now), those still as they were when their bytes were handled."""
SCAN_CHUNK = 1000  # names listed (and stamped, and looked up) at a time by the start-up scan
SCAN_WORKERS = 16  # files the scan reads at once (files are handled one at a time anyway)


def is_mission_file(path: Path) -> bool:
    name = path.name
    return name.endswith(".json") and not name.startswith(".") and not name.endswith(IGNORED_SUFFIXES)


def _taken_unchanged(taken: str | None, now: str, at_ns: int) -> bool:
    """A file an earlier scan took (its stamp then: ``taken``) still has that stamp, and the stamp is old enough
    to trust (:func:`polpo.intake.stamps.settled_stamp`: a change within the same clock tick could keep it)."""
    return taken == now and settled_stamp(now, at_ns)


def _stamped(folder: Path, names: Iterator[os.DirEntry[str]], n: int) -> dict[Path, str]:
    """The next ``n`` mission names of a listing, each with its stamp ("" when it cannot be stat'ed: read it)."""
    out: dict[Path, str] = {}
    for entry in names:
        path = folder / entry.name
        if entry.name.endswith(".json") and is_mission_file(path):
            st = file_stat(path)
            out[path] = "" if st is None else stamp_of(st)
            if len(out) >= n:
                break
    return out


class Faults(Protocol):
    """What the intake tells about a file waiting for a passing fault (the daemon: events, via the handler)."""

    def pause(self) -> Pause: ...

    def paused(self, path: Path, code: int, exc: BaseException, delay: float) -> None: ...

    def still(self, path: Path, pause: Pause) -> None: ...

    def resumed(self, path: Path, pause: Pause) -> None: ...


class LoggedFaults:
    """:class:`Faults` as log lines only (an intake without a store)."""

    def pause(self) -> Pause:
        return Pause(time.monotonic)

    def paused(self, path: Path, code: int, exc: BaseException, delay: float) -> None:
        log.warning("intake paused on %s: %s (%s); trying again in %.1f s", path, errno_name(code), exc, delay)

    def still(self, path: Path, pause: Pause) -> None:
        if pause.remind():
            log.warning("intake still paused on %s after %.0f s", path, pause.waited())

    def resumed(self, path: Path, pause: Pause) -> None:
        log.warning("intake resumed on %s after %.1f s", path, pause.done() or 0.0)


class Intake:
    def __init__(self, folder: Path, handler: Handler, *, force_polling: bool = False,
                 max_bytes: int = DEFAULT_MAX_BYTES, faults: Faults | None = None,
                 unchanged: Unchanged | None = None) -> None:
        self.folder = folder
        self.handler = handler
        self.unchanged = unchanged  # the scan reads only what changed since it was handled (None: every file)
        self.faults: Faults = faults if faults is not None else LoggedFaults()
        self._paused: dict[Path, Pause] = {}  # files waiting for a passing fault to pass
        self.force_polling = force_polling
        self.max_bytes = max_bytes
        self.stop_event = anyio.Event()
        self._pending: dict[Path, anyio.CancelScope] = {}
        self._queued: set[Path] = set()  # files the start-up scan found that no worker has taken yet
        self._handling: set[Path] = set()  # files read and waiting for, or in, the handler
        self._listed: dict[Path, str] = {}  # what the round's first scan took (see _scan)
        # files are handled one at a time, in arrival order; a finished file is filed (intake.filing) in a turn of
        # its own, so bytes read before it was filed are never handed over after
        self.turn = anyio.Lock()
        self.ready = anyio.Event()
        self.handled = 0  # files read and handed to the handler (duplicates included)
        self.live = False  # watching (a cluster node's intake runs only while it leads)
        self._watching: anyio.CancelScope | None = None

    async def run(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        async with anyio.create_task_group() as tg:
            pause = self.faults.pause()  # the watch or the scan meeting a passing fault (EMFILE, the store away)
            rescan = True  # the first scan finds the files added while the daemon was down
            while not self.stop_event.is_set():
                try:
                    # after a failed watch (no inotify instance left…) the folder is read at each try, so no file
                    # waits for the watch; the read is part of the try (its failure too); the pause ends when the
                    # watch is live again. A removed folder is made again here.
                    if rescan:
                        self.folder.mkdir(parents=True, exist_ok=True)
                        self._listed = await self._scan(tg)
                        rescan = False
                        self.ready.set()
                        self.live = True
                    await self._watch(tg, pause)
                except FolderGone:  # removed or moved away: made again (the rescan), and watched
                    log.warning("the missions folder %s was removed or moved away; it is made again and watched",
                                self.folder)
                    rescan = True
                    continue
                except Exception as exc:  # e.g. watchfiles cannot decode a file name that is not UTF-8
                    code = passing(exc, INPUT_PASSING) or errno_in(str(exc), INPUT_PASSING)  # (watchfiles: text)
                    if code is None:
                        log.exception("watching %s failed; scanning it and watching again", self.folder)
                        delay = WATCH_RESTART_DELAY
                    else:
                        delay = pause.failed()
                        if pause.tries == 1:
                            self.faults.paused(self.folder, code, exc, delay)
                        else:
                            self.faults.still(self.folder, pause)
                    rescan = True
                    with anyio.move_on_after(delay):
                        await self.stop_event.wait()
            self.live = False
            tg.cancel_scope.cancel()

    async def offer(self, path: Path, raw: bytes) -> bool:
        """Bytes the API has just written to ``path`` in the folder, handled now rather than when the watcher sees
        the file (which then finds the same bytes: a duplicate, nothing starts twice). False when this intake is
        not watching (a cluster node that does not lead): the leader's watcher takes the file in."""
        if not self.live:
            return False
        async with self.turn:
            try:
                await self.handler(path, raw, None)
            except Exception:  # the watcher's own turn for the file retries a passing fault, reports the rest
                log.warning("could not take in %s from the API at once; the watcher will", path, exc_info=True)
                return False
            finally:
                self.handled += 1
        return True

    async def _watch(self, tg: anyio.abc.TaskGroup, pause: Pause) -> None:
        """Watch until stopped. Events lost when this fails are found by the scan of the next round."""
        events = folder_events(self.folder, self.stop_event, force_polling=self.force_polling,
                               wanted=is_mission_file)
        with anyio.CancelScope() as self._watching:  # :meth:`stop` cancels it (the inotify source ends only so)
            if self.stop_event.is_set():
                return
            async with contextlib.aclosing(events) as batches:
                first = True
                async for batch in batches:
                    if first or batch is None:  # live now, or events were lost: read what arrived meanwhile
                        await self._scan(tg, self._listed if first else None)
                        self._listed = {}
                    if first:
                        first = False
                        if pause.paused:
                            self.faults.resumed(self.folder, pause)
                    for path in batch or ():
                        self._schedule(tg, path)

    async def _scan(self, tg: anyio.abc.TaskGroup, listed: dict[Path, str] | None = None) -> dict[Path, str]:
        """Every mission name, whatever it is (a directory named ``*.json`` is rejected once, not skipped), in name
        order; a file still as it was when it was handled (its stamp, :mod:`polpo.intake.stamps`) is not read again,
        so a folder of finished files costs a ``stat`` each. Listed a chunk at a time, off the loop.

        ``listed``: what the scan just before this one took, with its stamps (the watch's first scan, which finds
        what arrived while it started, follows the round's first at once: the store may not hold the first's
        records yet). A file taken then and unchanged since, with a stamp old enough to trust, is not taken again.
        Returns what this scan took."""
        found: dict[Path, str] = {}
        now = time.time_ns()
        with os.scandir(self.folder) as names:
            while chunk := await anyio.to_thread.run_sync(_stamped, self.folder, names, SCAN_CHUNK):
                skip = await self.unchanged(chunk) if self.unchanged is not None else set()
                found.update((p, st) for p, st in chunk.items() if p not in skip
                             and not (listed and _taken_unchanged(listed.get(p), st, now)))
        order = sorted(p for p in found if p not in self._pending and p not in self._queued
                       and p not in self._handling)  # (a file in flight is read by its own turn)
        if len(order) <= SCAN_WORKERS:
            for path in order:
                self._schedule(tg, path)
        else:
            queue = iter(order)  # thousands (a first start on a full folder): a few workers, not a task a file
            self._queued.update(order)
            for _ in range(SCAN_WORKERS):
                tg.start_soon(self._work_through, queue)
        return {p: found[p] for p in order}

    async def _work_through(self, queue: Iterator[Path]) -> None:
        for path in queue:
            self._queued.discard(path)
            if path not in self._pending:  # (a change of the file took it meanwhile)
                await self._settle_and_handle(path, self._pend(path))

    def _pend(self, path: Path) -> anyio.CancelScope:
        old = self._pending.pop(path, None)
        if old is not None:
            old.cancel()  # a newer change restarts the settle wait
        scope = self._pending[path] = anyio.CancelScope()
        return scope

    def _schedule(self, tg: anyio.abc.TaskGroup, path: Path) -> None:
        tg.start_soon(self._settle_and_handle, path, self._pend(path))

    async def _settle_and_handle(self, path: Path, scope: anyio.CancelScope) -> None:
        """Settle, then hand over; nothing a file does may end the intake (the handler stores its own errors).

        A passing fault (:mod:`polpo.fsfaults`) while reading or handling the file stores nothing: the file is
        tried again after a backoff, until it goes through; a change of the file meanwhile cuts the wait short."""
        while True:
            fault = await self._once(path, scope)
            if isinstance(fault, str):
                done = self._paused.pop(path, None) if fault == "done" else None  # superseded: a newer change of
                if done is not None:                                             # the file took the pause over
                    self.faults.resumed(path, done)
                return
            pause = self._paused.setdefault(path, self.faults.pause())
            delay = pause.failed()
            if pause.tries == 1:
                self.faults.paused(path, fault[0], fault[1], delay)
            else:
                self.faults.still(path, pause)
            if path in self._pending:  # a newer change of the file is on its way: it tries
                return
            scope = anyio.CancelScope()
            self._pending[path] = scope  # the intake is not idle while the file waits
            with scope:
                await anyio.sleep(delay)
            if scope.cancelled_caught:
                return

    async def _once(self, path: Path, scope: anyio.CancelScope) -> tuple[int, BaseException] | str:
        """Settle and hand over once: "done", "superseded" (a newer change took over) or the passing fault that
        stopped it."""
        try:
            with scope:
                got = await settled(path, self.max_bytes)
            if scope.cancelled_caught:
                return "superseded"
            if got is None:
                return "done"
        except Exception as exc:
            if (code := passing(exc, INPUT_PASSING)) is not None:
                return code, exc
            log.exception("could not read %s", path)
            return "done"
        finally:
            if self._pending.get(path) is scope:
                del self._pending[path]
        self._handling.add(path)
        try:
            async with self.turn:
                # changed, gone or filed since it was read: a newer turn (if any) has its bytes. These may have
                # run, and their file been filed, while this read waited (they would run again: a new "NAME#2")
                if file_key(path) != got.key:
                    return "done"
                try:
                    await self.handler(path, got.content, got.stamp)
                except Exception as exc:
                    if (code := passing(exc)) is not None:
                        return code, exc
                    log.exception("could not handle %s", path)
                finally:
                    self.handled += 1
        finally:
            self._handling.discard(path)
        return "done"

    @property
    def idle(self) -> bool:
        """No file is waiting to settle or being handled."""
        return not self._pending and not self._queued and not self.turn.locked()

    def stop(self) -> None:
        self.stop_event.set()
        if self._watching is not None:
            self._watching.cancel()
