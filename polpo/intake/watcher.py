"""The missions folder: a start-up scan, then watchfiles events, each file settled before it is read.

Only ``*.json`` files directly in the folder count; dot-files and temp files (``.x.json.tmp``, ``*.part`` …)
are ignored, so writers that use temp-file + rename (``polpo submit`` does) are seen once, whole. For
writers that do not, a file is read only when its size and mtime stop changing, and a file that does not
parse yet is given a moment more before it is rejected as not JSON.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import orjson
from watchfiles import Change, awatch

log = logging.getLogger("polpo.intake")

IGNORED_SUFFIXES = (".tmp", ".part", ".partial", ".swp", ".swx", "~", ".crdownload")
SETTLE_STEP = 0.05  # seconds between two size/mtime readings
SETTLE_MAX = 30.0  # give up waiting for a writer that never stops
UNPARSABLE_GRACE = 1.0  # how long a file that is not (yet) JSON must stay unchanged before it is rejected

Handler = Callable[[Path, bytes], Awaitable[object]]


def is_mission_file(path: Path) -> bool:
    name = path.name
    return name.endswith(".json") and not name.startswith(".") and not name.endswith(IGNORED_SUFFIXES)


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_size, st.st_mtime_ns)


async def settle(path: Path) -> bytes | None:
    """The file's bytes once they stop changing; None if it vanished."""
    waited = 0.0
    stable_for = 0.0
    prev = _stat(path)
    while True:
        await anyio.sleep(SETTLE_STEP)
        waited += SETTLE_STEP
        cur = _stat(path)
        if cur is None:
            return None
        if cur != prev:
            prev, stable_for = cur, 0.0
            if waited < SETTLE_MAX:
                continue
        stable_for += SETTLE_STEP
        try:
            raw = await anyio.Path(path).read_bytes()
        except FileNotFoundError:
            return None
        if _parses(raw) or stable_for >= UNPARSABLE_GRACE or waited >= SETTLE_MAX:
            return raw


def _parses(raw: bytes) -> bool:
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return True


class Intake:
    def __init__(self, folder: Path, handler: Handler, *, force_polling: bool = False) -> None:
        self.folder = folder
        self.handler = handler
        self.force_polling = force_polling
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
            tg.cancel_scope.cancel()

    def _scan(self, tg: anyio.abc.TaskGroup) -> None:
        for path in sorted(self.folder.glob("*.json")):
            if is_mission_file(path) and path.is_file() and path not in self._pending:
                self._schedule(tg, path)

    def _schedule(self, tg: anyio.abc.TaskGroup, path: Path) -> None:
        old = self._pending.pop(path, None)
        if old is not None:
            old.cancel()  # a newer change restarts the settle wait
        scope = anyio.CancelScope()
        self._pending[path] = scope
        tg.start_soon(self._settle_and_handle, path, scope)

    async def _settle_and_handle(self, path: Path, scope: anyio.CancelScope) -> None:
        with scope:
            raw = await settle(path)
        if scope.cancelled_caught or raw is None:
            return
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
