"""After ``polpo submit`` wrote a mission file: the running daemon's verdict on it, printed where the person is.

Without it, ``submit`` ended when the file was in the folder, and a person who went on at once (``polpo show
NAME``) could ask before the daemon had read it, and a rejection the local check could not foresee (the file's
bytes still running, the daemon's own policy) showed only in the event log. So ``submit`` waits, a few seconds at
most, for the event that decides the file — ``mission:accepted``, ``mission:rejected`` or ``schedule:created`` —
read from the store after the last event it saw before writing, and says what it was. With no daemon running it
says the file waits for one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

__all__ = ["Verdict", "await_verdict", "describe", "verdict_of"]

DECIDING = frozenset({"mission:accepted", "mission:rejected", "schedule:created"})

Verdict = tuple[str, str | None, dict[str, Any]]
"""(event, mission id, data) of the event that decided the file."""

EventRow = tuple[int, str, str, str | None, str | None, str, str | None]


def verdict_of(rows: Iterable[EventRow], name: str, digest: str) -> Verdict | None:
    """The first of ``rows`` (the store's events, oldest first) that decides the file ``name`` with these bytes.
    Pure. A schedule names the file but not its bytes' hash."""
    for _seq, _ts, event, mission_id, _task, data, _node in rows:
        if event not in DECIDING:
            continue
        d = orjson.loads(data)
        if Path(str(d.get("file", ""))).name == name and d.get("hash", digest) == digest:
            return event, mission_id, d
    return None


def await_verdict(read_after: Callable[[int], list[EventRow]], after: int, name: str, digest: str, *,
                  timeout: float, poll: float = 0.05, clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep) -> Verdict | None:
    """Poll ``read_after(seq)`` until an event decides the file, or ``timeout`` seconds pass (None)."""
    deadline = clock() + timeout
    while True:
        rows = read_after(after)
        found = verdict_of(rows, name, digest)
        if found is not None:
            return found
        if rows:
            after = rows[-1][0]
        if clock() >= deadline:
            return None
        sleep(poll)


def describe(verdict: Verdict) -> tuple[bool, list[str]]:
    """(accepted, the lines to print) for a verdict (the stored event's data, camelCase). Pure."""
    event, mission_id, d = verdict
    if event == "mission:accepted":
        tasks = d.get("taskCount")
        return True, [f"accepted: mission {mission_id} ({tasks} task{'' if tasks == 1 else 's'})"]
    if event == "schedule:created":
        when = d.get("nextRunAt") or "none left"
        return True, [f"scheduled: {d.get('scheduleId')} ({d.get('expression')}, {d.get('timezone')}); next run "
                      f"{when}"]
    lines = [f"rejected by the daemon: {d.get('reason')}", *[f"  {line}" for line in d.get("lines") or []]]
    return False, lines
