"""A finished mission's file leaves the watched folder for ``done/`` beside it (``[retention] finished_files``).

Why this is the default: the missions folder is a drop folder, and a drop folder's user expects it to hold what is
waiting or running (and what was refused, to fix), with each file dropped once processed — as hot folders, mail
queues and file pipelines do (Camel's ``.done``, NiFi, Logstash's completed files). It also keeps the start-up
scan and the folder's listing the size of the live work, not of the history. ``"keep"`` leaves files in place:
a folder kept in git, or edited and saved again to run again (``NAME#2``), wants that.

What moves: only a file whose mission finished and which still holds the bytes that mission ran (an edit made
meanwhile stays, and is read as new bytes), never a schedule's file (it is the schedule), never a rejected one.
The move is a hard link into ``done/`` then the removal of the name (never over another file: ``NAME.json``,
else ``STEM#RUN.json``, else with ``-2``, ``-3``…), after the mission's end is stored; the file's record then
matches no bytes, so the same file dropped again starts a new run. A daemon that stops between the end and the
move leaves the file in place, inert (its bytes are known): nothing is lost, nothing runs twice.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from polpo.engine.admission import Admission
from polpo.events.catalog import Event, MissionFiled
from polpo.model.records import Mission
from polpo.model.status import SourceOutcome

__all__ = ["DONE", "Filing", "Finished", "done_name", "file_away"]

log = logging.getLogger("polpo.intake")

DONE = "done"


@dataclass(frozen=True)
class Finished:
    id: str
    source: str
    hash: str
    run: int


class Filing:
    """Told of each mission that finishes (a completion hook) and of each committed event (a store subscriber):
    once a finished mission's ``mission:completed`` is stored, its file is filed, in order, off the loop.

    ``turn``: the intake's (:attr:`polpo.intake.watcher.Intake.turn`). A file is filed between two handlings,
    never while bytes read from it before are being handled (read before the move, handled after the record
    forgot them, they would start the run again)."""

    def __init__(self, admission: Admission, folder: Path, turn: anyio.Lock) -> None:
        self.admission = admission
        self.folder = folder
        self.turn = turn
        self._finishing: dict[str, Finished] = {}  # completions decided, not yet stored (a few at a time)
        self._send: MemoryObjectSendStream[Finished]
        self._recv: MemoryObjectReceiveStream[Finished]
        self._send, self._recv = anyio.create_memory_object_stream[Finished](max_buffer_size=10_000)

    def finishing(self, m: Mission) -> None:
        """The board decided that ``m`` is over (its end is on its way to the store)."""
        if Path(m.source).parent == self.folder:
            self._finishing[m.id] = Finished(m.id, m.source, m.hash, m.run)

    def observe(self, ev: Event) -> None:
        """A committed event: a finished mission's end is stored, its file may go."""
        if ev.event == "mission:completed" and ev.mission_id is not None:
            done = self._finishing.pop(ev.mission_id, None)
            if done is not None:
                try:
                    self._send.send_nowait(done)
                except anyio.WouldBlock:  # thousands at once: this one stays in place, inert
                    log.warning("too many finished missions at once: %s stays in the missions folder", done.source)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):  # the daemon is stopping
                    log.info("the daemon is stopping: %s stays in the missions folder", done.source)

    async def run(self) -> None:
        """File finished missions until the daemon stops; both ends of the queue close with it."""
        async with self._send, self._recv:
            async for done in self._recv:
                try:
                    await self.file(done)
                except Exception:  # a file that cannot move stays where it is: its bytes are known, nothing reruns
                    log.exception("could not move %s to %s/", done.source, DONE)

    async def file(self, done: Finished) -> Path | None:
        async with self.turn:
            return await self._file(done)

    async def _file(self, done: Finished) -> Path | None:
        adm = self.admission
        known = await adm.source(done.source)
        if known is None or known.outcome is not SourceOutcome.ACCEPTED or known.mission_id != done.id \
                or known.hash != done.hash or adm.active_for_source(done.source) is not None:
            return None  # edited meanwhile, a schedule's, forgotten, or running again
        to = await anyio.to_thread.run_sync(file_away, Path(done.source), done.hash, done.run)
        if to is None:
            return None
        adm.record(replace(known, hash="", stamp=None))
        adm.store.submit(adm.store.tx().event(MissionFiled(file=done.source, to=str(to)), mission_id=done.id))
        return to


def done_name(name: str, run: int, k: int) -> str:
    """The ``k``-th name tried in ``done/`` (from 1): ``NAME.json`` (``STEM#RUN.json`` for a later run), then with
    ``-2``, ``-3``… before ``.json``."""
    stem = name.removesuffix(".json")
    base = stem if run == 1 else f"{stem}#{run}"
    return f"{base}.json" if k == 1 else f"{base}-{k}.json"


def file_away(path: Path, digest: str, run: int) -> Path | None:
    """Move ``path`` into ``done/`` beside it if it still holds the bytes hashing to ``digest``; where it went.
    Never over another file, and never a file other than the one hashed (another renamed over it meanwhile)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None  # gone, or a symlink (left as it is)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if hashlib.sha256(f.read()).hexdigest() != digest:
            return None
    folder = path.parent / DONE
    folder.mkdir(exist_ok=True)
    for k in range(1, 1000):
        target = folder / done_name(path.name, run, k)
        try:
            os.link(path, target)
        except FileExistsError:
            continue
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            if target.exists():  # a file system without hard links: a rename that looks first
                continue
            os.rename(path, target)
            return target
        now = os.stat(target)
        if (now.st_ino, now.st_size, now.st_mtime_ns) != (st.st_ino, st.st_size, st.st_mtime_ns):
            os.unlink(target)  # the name led to another file by then: leave that one
            return None
        os.unlink(path)
        return target
    return None
