"""``polpo tail``: the event log, readable.

Imports inside the command functions are lazy on purpose: each command loads only what it uses, so quick
commands start fast.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import click

from polpo.cli.common import config_option, locate_or_exit


@click.command()
@click.option("-f", "--follow", is_flag=True, help="Keep printing new events as they arrive.")
@click.option("--mission", "mission_id", metavar="ID", help="Only this mission's events.")
@click.option("--event", "pattern", metavar="GLOB", help="Only events matching, e.g. 'task:*' or 'sla:*'.")
@click.option("--json", "as_json", is_flag=True, help="Print the raw JSON lines.")
@click.option("-n", "--lines", default=20, show_default=True, help="How many past events to show first.")
@config_option
def tail(follow: bool, mission_id: str | None, pattern: str | None, as_json: bool, lines: int,
         config_path: str | None) -> None:
    """Show the event log (<state_dir>/events.jsonl) readably."""
    import orjson

    from polpo.events.names import matches
    from polpo.events.render import render, use_color

    cfg = locate_or_exit(config_path)
    color = use_color(sys.stdout)  # a terminal, not a pipe, no NO_COLOR
    path = cfg.events_path

    def keep(ev: dict[str, Any]) -> bool:
        if mission_id and ev.get("missionId") != mission_id and not str(ev.get("missionId", "")).startswith(
                mission_id + "#"):
            return False
        return not (pattern and not matches(str(ev.get("event", "")), pattern))

    def _keeps(raw: bytes) -> bool:
        try:
            return keep(orjson.loads(raw))
        except orjson.JSONDecodeError:
            return False

    def emit(raw: bytes) -> None:
        try:
            ev = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return
        if keep(ev):
            click.echo(raw.decode().rstrip("\n") if as_json else render(ev, color=color))

    while not path.exists():
        if not follow:
            raise click.ClickException(f"no event log at {path} yet: start the daemon first")
        time.sleep(0.2)
    needle = f'"missionId":"{mission_id}'.encode() if mission_id else None  # skip lines before parsing them
    with open(path, "rb") as f:
        for raw in last_lines(f, max(lines, 0), lambda raw: (needle is None or needle in raw) and _keeps(raw)):
            emit(raw)
        if not follow:
            return
        try:
            follow_file(path, f, emit)
        except KeyboardInterrupt:
            return


def last_lines(f: BinaryIO, n: int, keep: Callable[[bytes], bool], chunk: int = 1 << 16) -> list[bytes]:
    """The last ``n`` complete lines that ``keep`` accepts, read backwards from the end.

    ``f`` is left just after the last complete line, where following starts (a torn last line is not shown;
    following prints it once it is complete).
    """
    end = f.seek(0, os.SEEK_END)
    complete_end = 0
    pos = end
    while pos > 0:
        step = min(chunk, pos)
        pos -= step
        f.seek(pos)
        newline = f.read(step).rfind(b"\n")
        if newline >= 0:
            complete_end = pos + newline + 1
            break
    found: list[bytes] = []
    carried = b""  # the end of a line whose start is in an earlier chunk
    pos = complete_end
    while pos > 0 and len(found) < n:
        step = min(chunk, pos)
        pos -= step
        f.seek(pos)
        lines = (f.read(step) + carried).split(b"\n")
        carried = lines.pop(0) if pos > 0 else b""
        for raw in reversed(lines):
            if raw and keep(raw):
                found.append(raw + b"\n")
                if len(found) >= n:
                    break
    f.seek(complete_end)
    return found[::-1]


def follow_file(path: Path, f: BinaryIO, emit: Callable[[bytes], None]) -> None:
    """Print lines as they are appended; after a rotation (the path now names another file, or the file was
    truncated) finish the old file and go on with the new one."""
    buf = b""
    ino = os.fstat(f.fileno()).st_ino
    while True:
        chunk = f.readline()
        if chunk:
            buf += chunk
            if buf.endswith(b"\n"):
                emit(buf)
                buf = b""
            continue
        try:
            st = os.stat(path)
        except FileNotFoundError:
            time.sleep(0.1)
            continue
        if st.st_ino != ino:  # rotated: the rest of the old file was read above
            f.close()
            f = open(path, "rb")  # noqa: SIM115 - replaces the handle we follow
            ino, buf = os.fstat(f.fileno()).st_ino, b""
            continue
        if st.st_size < f.tell():  # truncated in place (copytruncate)
            f.seek(0)
            buf = b""
            continue
        time.sleep(0.1)
