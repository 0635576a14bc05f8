"""A mission file read once its writer is done: its bytes when they parse whole, or once its size and mtime stop
changing (or why it is not read).

For writers that do not rename a whole file into the folder, a file is read only when its size and mtime stop
changing. A file that does not parse yet is given a moment more before it is rejected: a second if it is broken
in the middle, longer if it looks cut short (a slow writer between two chunks). Reading goes through
:mod:`polpo.intake.reader`: a directory, FIFO or socket named ``*.json`` and a file over
``[daemon] max_mission_bytes`` reach the handler as :class:`~polpo.intake.reader.Unreadable`, never as bytes.
"""

from __future__ import annotations

import os
import time
from enum import Enum
from functools import partial
from pathlib import Path
from typing import NamedTuple

import anyio
import orjson

from polpo.config import DaemonSettings
from polpo.intake.reader import Unreadable, read_mission_file
from polpo.intake.stamps import trusted
from polpo.mission.jsonbytes import strip_bom

__all__ = ["DEFAULT_MAX_BYTES", "INCOMPLETE_GRACE", "SETTLE_MAX", "SETTLE_STEP", "UNPARSABLE_GRACE", "Content",
           "FileKey", "Settled", "Shape", "file_key", "file_stat", "settle", "settled", "shape"]

SETTLE_STEP = 0.05  # seconds between two size/mtime readings
SETTLE_MAX = 30.0  # give up waiting for a writer that never stops
UNPARSABLE_GRACE = 1.0  # how long a file that is broken JSON must stay unchanged before it is rejected
INCOMPLETE_GRACE = 10.0  # the same for a file that looks cut short (or is still empty): a writer may be pausing
DEFAULT_MAX_BYTES: int = DaemonSettings.model_fields["max_mission_bytes"].default

Content = bytes | Unreadable


def file_stat(path: Path | str) -> os.stat_result | None:
    """What the name points to, the link itself if it dangles; None if gone."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        try:
            return os.lstat(path)
        except FileNotFoundError:
            return None
    except OSError:
        try:
            return os.lstat(path)  # a link loop, a permission problem: let the reader say what it is
        except OSError:
            return None


FileKey = tuple[int, int, int, int]


def _key(st: os.stat_result | None) -> FileKey | None:
    """What a change of the file changes: mode, size, mtime, inode (another file renamed over it)."""
    return None if st is None else (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)


def file_key(path: Path | str) -> FileKey | None:
    """The key (:func:`_key`) of what ``path`` names now; None if nothing."""
    return _key(file_stat(path))


class Settled(NamedTuple):
    content: Content
    stamp: str | None  # the stamp of what was read (polpo.intake.stamps), None until it can be trusted
    key: FileKey  # the file as it was read: the intake hands the bytes over only while the file is still so


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
    got = await settled(path, max_bytes)
    return None if got is None else got.content


async def settled(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> Settled | None:
    """The file's bytes once they stop changing (or why they are not read), with the stamp and key of what was
    read; None if it vanished.

    The first reading is immediate: a file that arrived whole (renamed into the folder, or closed after it was
    written) parses as one complete JSON document and is handed over at once. A file still being written is
    never complete JSON (a mission is an object: any prefix of it lacks the closing brace), so it waits for its
    size and mtime to stop changing as before."""
    waited = 0.0
    stable_for = 0.0
    prev = file_key(path)
    read_at: FileKey | None = None
    stamp: str | None = None
    content: Content | None = None
    grace = 0.0
    first = True
    while True:
        if first:
            first = False
        else:
            await anyio.sleep(SETTLE_STEP)
            waited += SETTLE_STEP
        st = file_stat(path)
        cur = _key(st)
        if st is None or cur is None:
            return None
        changing = cur != prev
        if changing:
            prev, stable_for = cur, 0.0
            if waited < SETTLE_MAX:
                continue
        stable_for += SETTLE_STEP if waited else 0.0
        if cur != read_at:  # read again only when the file changed
            stamp = trusted(st, time.time_ns())  # (taken before the read: a later change never matches it)
            content = await anyio.to_thread.run_sync(partial(read_mission_file, path, max_bytes, raise_passing=True))
            read_at = cur
            if content is None:
                return None
            grace = 0.0 if isinstance(content, Unreadable) else _GRACE[shape(content)]
        if content is not None and read_at is not None and (stable_for >= grace
                                                            or (changing and waited >= SETTLE_MAX)):
            return Settled(content, stamp, read_at)
