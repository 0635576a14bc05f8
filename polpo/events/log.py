"""The event log: ``<state_dir>/events.jsonl``, one JSON object per line, flushed per line.

Written through structlog (a ``BytesLogger`` flushes each line, so ``tail -f`` sees it at once) after the
event's transaction has committed. The store's ``events`` table is the outbox: on start-up the log is
caught up from it, so a crash between commit and write loses no line.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import structlog

from polpo.events.catalog import Event

_ORDER = ("seq", "ts", "event", "missionId", "taskId", "data")


def _render(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> bytes:
    ordered = {k: event_dict[k] for k in _ORDER if k in event_dict}
    return orjson.dumps(ordered)


class EventLog:
    """Appends events to the JSON-lines file."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file: BinaryIO = open(path, "ab", buffering=0)  # noqa: SIM115 - lives as long as the log
        self._log = structlog.wrap_logger(
            structlog.BytesLogger(self._file), processors=[_render], cache_logger_on_first_use=True
        )
        self.last_seq = last_seq_in(path)

    def write(self, ev: Event) -> None:
        if ev.seq <= self.last_seq:
            return  # already there (catch-up after a crash)
        fields = ev.to_json_dict()
        name = fields.pop("event")
        self._log.info(name, **fields)
        self.last_seq = ev.seq

    def close(self) -> None:
        self._file.close()


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
