"""The missions folder: a start-up scan, then watchfiles events, each file settled before it is read.

Only ``*.json`` names directly in the folder count; dot-files and temp files (``.x.json.tmp``, ``*.part`` …)
are ignored, so writers that use temp-file + rename (``polpo submit`` does) are seen once, whole. For
writers that do not, a file is read only when its size and mtime stop changing. A file that does not parse
yet is given a moment more before it is rejected: a second if it is broken in the middle, longer if it
looks cut short (a slow writer between two chunks). Reading goes through :mod:`polpo.intake.reader`: a
directory, FIFO or socket named ``*.json`` and a file over ``[daemon] max_mission_bytes`` reach the handler
as :class:`~polpo.intake.reader.Unreadable`, never as bytes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from enum import Enum
from pathlib import Path

import anyio
import orjson
from watchfiles import Change, awatch

from polpo.config import DaemonSettings
from polpo.intake.reader import Unreadable, read_mission_file
from polpo.mission.jsonbytes import strip_bom

log = logging.getLogger("polpo.intake")

IGNORED_SUFFIXES = (".tmp", ".part", ".partial", ".swp", ".swx", "~", ".crdownload")
SETTLE_STEP = 0.05  # seconds between two size/mtime readings
SETTLE_MAX = 30.0  # give up waiting for a writer that never stops
UNPARSABLE_GRACE = 1.0  # how long a file that is broken JSON must stay unchanged before it is rejected
INCOMPLETE_GRACE = 10.0  # the same for a file that looks cut short (or is still empty): a writer may be pausing
WATCH_RESTART_DELAY = 0.5  # after the watcher failed, before it watches (and scans) again
DEFAULT_MAX_BYTES: int = DaemonSettings.model_fields["max_mission_bytes"].default

Content = bytes | Unreadable
Handler = Callable[[Path, Content], Awaitable[object]]


def is_mission_file(path: Path) -> bool:
    name = path.name
    return name.endswith(".json") and not name.startswith(".") and not name.endswith(IGNORED_SUFFIXES)


def _stat(path: Path) -> tuple[int, int, int] | None:
    """(mode, size, mtime) of what the name points to, of the link itself if it dangles; None if gone."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
    except OSError:
        try:
            st = os.lstat(path)  # a link loop, a permission problem: let the reader say what it is
        except OSError:
            return None
    return (st.st_mode, st.st_size, st.st_mtime_ns)


class Shape(Enum):
    COMPLETE = "complete"  # parses: read it now
    INCOMPLETE = "incomplete"  # empty, or ends in the middle of the JSON: a writer may not be done
    BROKEN = "broken"  # wrong somewhere before the end


def shape(raw: bytes) -> Shape:
    """Whether ``raw`` is whole JSON, a prefix of JSON (cut short), or broken; BOMs as the loader treats them."""
    body = strip_bom(raw)
    if not body.strip():
        return Shape.INCOMPLETE
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError as e:
        if e.msg.startswith("unexpected end of data"):
            return Shape.INCOMPLETE
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as u:
            if u.reason == "unexpected end of data" and u.end == len(body):  # cut inside a character
                return Shape.INCOMPLETE
        return Shape.BROKEN
    return Shape.COMPLETE


_GRACE = {Shape.COMPLETE: 0.0, Shape.BROKEN: UNPARSABLE_GRACE, Shape.INCOMPLETE: INCOMPLETE_GRACE}


async def settle(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> Content | None:
    """The file's bytes once they stop changing (or why they are not read); None if it vanished."""
    waited = 0.0
    stable_for = 0.0
    prev = _stat(path)
    read_at: tuple[int, int, int] | None = None
    content: Content | None = None
    grace = 0.0
    while True:
        await anyio.sleep(SETTLE_STEP)
        waited += SETTLE_STEP
        cur = _stat(path)
        if cur is None:
            return None
        changing = cur != prev
        if changing:
            prev, stable_for = cur, 0.0
            if waited < SETTLE_MAX:
                continue
        stable_for += SETTLE_STEP
        if cur != read_at:  # read again only when the file changed
            content = await anyio.to_thread.run_sync(read_mission_file, path, max_bytes)
            read_at = cur
            if content is None:
                return None
            grace = 0.0 if isinstance(content, Unreadable) else _GRACE[shape(content)]
        if stable_for >= grace or (changing and waited >= SETTLE_MAX):
            return content


class Intake:
    def __init__(self, folder: Path, handler: Handler, *, force_polling: bool = False,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.folder = folder
        self.handler = handler
        self.force_polling = force_polling
        self.max_bytes = max_bytes
        self.stop_event = anyio.Event()
        self._pending: dict[Path, anyio.CancelScope] = {}
        self._lock = anyio.Lock()  # files are handled one at a time, in arrival order
        self.ready = anyio.Event()
        self.handled = 0  # files read and handed to the handler (duplicates included)

    async def run(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        async with anyio.create_task_group() as tg:
            self._scan(tg)  # files added while the daemon was down
            self.ready.set()
            while not self.stop_event.is_set():
                try:
                    await self._watch(tg)
                except Exception:  # e.g. watchfiles cannot decode a file name that is not UTF-8
                    log.exception("watching %s failed; scanning it and watching again", self.folder)
                    with anyio.move_on_after(WATCH_RESTART_DELAY):
                        await self.stop_event.wait()
            tg.cancel_scope.cancel()

    async def _watch(self, tg: anyio.abc.TaskGroup) -> None:
        """Watch until stopped. Events lost when this fails are found by the scan of the next round."""
        watcher = awatch(self.folder, watch_filter=lambda _c, p: is_mission_file(Path(p)), recursive=False,
                         stop_event=self.stop_event, force_polling=self.force_polling or None,
                         step=30, rust_timeout=1000, yield_on_timeout=True)
        first = True
        async for changes in watcher:
            if first:  # the watcher is live now: scan once more for files that arrived in between
                first = False
                self._scan(tg)
            for change, p in changes:
                path = Path(p)
                if change in (Change.added, Change.modified) and path.parent == self.folder:
                    self._schedule(tg, path)

    def _scan(self, tg: anyio.abc.TaskGroup) -> None:
        """Every mission name, whatever it is: a directory named ``*.json`` is rejected once, not skipped."""
        for path in sorted(self.folder.glob("*.json")):
            if is_mission_file(path) and path not in self._pending:
                self._schedule(tg, path)

    def _schedule(self, tg: anyio.abc.TaskGroup, path: Path) -> None:
        old = self._pending.pop(path, None)
        if old is not None:
            old.cancel()  # a newer change restarts the settle wait
        scope = anyio.CancelScope()
        self._pending[path] = scope
        tg.start_soon(self._settle_and_handle, path, scope)

    async def _settle_and_handle(self, path: Path, scope: anyio.CancelScope) -> None:
        """Settle, then hand over; nothing a file does may end the intake (the handler stores its own errors)."""
        try:
            with scope:
                raw = await settle(path, self.max_bytes)
            if scope.cancelled_caught or raw is None:
                return
        except Exception:
            log.exception("could not read %s", path)
            return
        finally:
            if self._pending.get(path) is scope:
                del self._pending[path]
        async with self._lock:
            try:
                await self.handler(path, raw)
            except Exception:
                log.exception("could not handle %s", path)
            finally:
                self.handled += 1

    @property
    def idle(self) -> bool:
        """No file is waiting to settle or being handled."""
        return not self._pending and not self._lock.locked()

    def stop(self) -> None:
        self.stop_event.set()
