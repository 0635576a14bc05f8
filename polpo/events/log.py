"""The event log: ``<state_dir>/events.jsonl``, one JSON object per line.

Written through structlog after each commit, one ``write`` per committed batch (flushed, so ``tail -f`` sees it at
once); each event's ``data`` is serialised once, by the store, and embedded as is. The store's ``events`` table is
the outbox: on start-up the log is caught up from it, so a crash between commit and write loses no line, and so
is it while running after a write failed (a full or read-only disk: the store's writer retries with its backoff).
A batch whose write failed counts as unwritten, and a part of it that reached the file is cut off again.

Rotation: ``SIGHUP`` (or a moved or deleted file, noticed before each write) reopens the path. The position file
``events.jsonl.pos`` remembers the last ``seq`` written, so a restart after a rotation appends only the events the
log has not had yet instead of copying the whole history into the new file. It also carries the identity of the
store the log is written from (``<store id> <seq>``; a file from before identities holds the seq alone), which
the daemon compares with its store's at start (:mod:`polpo.store.identity`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, MutableMapping
from pathlib import Path
from typing import Any, BinaryIO, cast

import orjson
import structlog

from polpo.events.catalog import Event

__all__ = ["EventLog", "ensure_newline", "last_seq_in", "read_lines"]

_POS_WIDTH = 64  # "<uuid> <seq>\n" is at most 58 bytes; the old "<seq>\n" was padded to 21

def _render(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> bytes:
    """structlog's renderer: one line per event of the batch (``data`` is already JSON, embedded as is)."""
    return b"\n".join(orjson.dumps(line) for line in event_dict["lines"])


class _Lines:
    """The file structlog writes to: collects a batch's lines; the log writes them with one syscall."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(data)
        return len(data)

    def flush(self) -> None:
        return None


class EventLog:
    """Appends events to the JSON-lines file."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.pos_path = path.with_name(path.name + ".pos")
        self._lines = _Lines()
        self._log = structlog.wrap_logger(structlog.BytesLogger(cast(BinaryIO, self._lines)), processors=[_render],
                                          cache_logger_on_first_use=True)
        self._fd = -1
        self._pos_fd = -1  # kept open: opening and closing it on every batch was two syscalls a batch
        self._ino: tuple[int, int] | None = None
        self.reopens = 0
        self._open()
        recorded, self.store_id = self._recorded()
        self.last_seq = max(last_seq_in(path), recorded)

    def _open(self) -> None:
        ensure_newline(self.path)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        st = os.fstat(fd)
        pos_fd = os.open(self.pos_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self.close()
        self._fd, self._pos_fd, self._ino = fd, pos_fd, (st.st_dev, st.st_ino)

    def reopen(self) -> None:
        """Open the path again (after logrotate moved the file away): later lines go to the new file."""
        self._open()
        self.reopens += 1

    def _moved(self) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return True
        return (st.st_dev, st.st_ino) != self._ino

    def _recorded(self) -> tuple[int, str | None]:
        """The position file's seq and store identity (None: not recorded, as in files written before it was)."""
        try:
            fields = self.pos_path.read_text().split()
        except FileNotFoundError:
            return 0, None
        store_id = fields.pop(0) if len(fields) > 1 else None
        return (int(fields[0]) if fields and fields[0].isdigit() else 0), store_id

    def _write_pos(self) -> None:
        """The store's identity and the last seq written, in place (fixed width: no truncate needed; the identity
        first, so a seq that grows a digit never shifts it)."""
        text = f"{self.store_id} {self.last_seq}\n" if self.store_id else f"{self.last_seq}\n"
        os.pwrite(self._pos_fd, text.encode().ljust(_POS_WIDTH), 0)

    def adopt(self, store_id: str) -> None:
        """Record the identity of the store this log is written from (a first start, or an upgrade)."""
        self.store_id = store_id
        self._write_pos()

    def archive(self, stamp: str) -> Path:
        """Move the log (and its position file) to ``events.jsonl.<stamp>`` and begin a new, empty one."""
        self.close()
        target = self.path.with_name(f"{self.path.name}.{stamp}")
        n = 1
        while target.exists() or target.with_name(target.name + ".pos").exists():
            n += 1
            target = self.path.with_name(f"{self.path.name}.{stamp}-{n}")
        for src, dst in ((self.path, target), (self.pos_path, target.with_name(target.name + ".pos"))):
            with contextlib.suppress(FileNotFoundError):
                os.rename(src, dst)
        self.store_id, self.last_seq = None, 0
        self._open()
        return target

    def write(self, ev: Event) -> None:
        self.write_many((ev,))

    def write_many(self, events: Iterable[Event]) -> None:
        """Append the events the log lacks (seq above the last written), with one write."""
        lines: list[dict[str, Any]] = []
        before = self.last_seq
        for ev in events:
            if ev.seq <= self.last_seq:
                continue  # already there (catch-up after a crash)
            line: dict[str, Any] = {"seq": ev.seq, "ts": ev.ts, "event": ev.event}
            if ev.mission_id is not None:
                line["missionId"] = ev.mission_id
            if ev.task_id is not None:
                line["taskId"] = ev.task_id
            if ev.node is not None:
                line["node"] = ev.node
            line["data"] = orjson.Fragment(ev.data_bytes())
            lines.append(line)
            self.last_seq = ev.seq
        if not lines:
            return
        self._log.info("events", lines=lines)  # one structlog call per batch
        data = b"".join(self._lines.parts)
        self._lines.parts.clear()
        view = memoryview(data)
        try:
            if self._moved():
                self.reopen()
            while view:
                view = view[os.write(self._fd, view):]
        except OSError:
            # a full or read-only disk…: none of the batch counts as written. A part that was written is cut off
            # again, so the batch is written whole (and once) when the store catches the log up
            self.last_seq = before
            if len(view) < len(data):
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, os.fstat(self._fd).st_size - (len(data) - len(view)))
            raise
        self._write_pos()  # for the next start (a torn or stale value only costs a few duplicate lines)

    def close(self) -> None:
        for fd in (self._fd, self._pos_fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._pos_fd = -1


def last_seq_in(path: Path) -> int:
    """The ``seq`` of the last complete line of the log, 0 if none (reads only the file's tail)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with open(path, "rb") as f:
        chunk = 1 << 16
        pos = size
        tail = b""
        while pos > 0:
            step = min(chunk, pos)
            pos -= step
            f.seek(pos)
            tail = f.read(step) + tail
            lines = tail.split(b"\n")
            # lines[0] may be partial unless we reached the start; the last may be an unterminated write
            candidates = lines if pos == 0 else lines[1:]
            for line in reversed(candidates):
                if not line.strip():
                    continue
                try:
                    return int(orjson.loads(line)["seq"])
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                    continue
    return 0


def read_lines(path: Path, *, follow_from: int = 0) -> Iterator[dict[str, Any]]:
    """Parsed lines of the log from byte offset ``follow_from`` (skips a torn last line)."""
    with open(path, "rb") as f:
        f.seek(follow_from)
        for line in f:
            if not line.endswith(b"\n"):
                break
            try:
                yield orjson.loads(line)
            except orjson.JSONDecodeError:
                continue


def ensure_newline(path: Path) -> None:
    """Terminate a torn last line left by a crash so the next event starts on a line of its own."""
    try:
        with open(path, "rb+") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                f.write(b"\n")
    except FileNotFoundError:
        return
