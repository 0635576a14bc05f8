"""``polpo tail``: the event log, readable.

Imports inside the command functions are lazy on purpose: each command loads only what it uses, so quick
commands start fast.
"""

from __future__ import annotations

import os
import time
from collections import deque
from typing import Any

import click

from polpo.cli.common import config_option, load_config_or_exit


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

    from polpo.events.catalog import matches
    from polpo.events.render import render

    cfg = load_config_or_exit(config_path)
    path = cfg.events_path

    def keep(ev: dict[str, Any]) -> bool:
        if mission_id and ev.get("missionId") != mission_id and not str(ev.get("missionId", "")).startswith(
                mission_id + "#"):
            return False
        return not (pattern and not matches(str(ev.get("event", "")), pattern))

    def emit(raw: bytes) -> None:
        try:
            ev = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return
        if keep(ev):
            click.echo(raw.decode().rstrip("\n") if as_json else render(ev))

    while not path.exists():
        if not follow:
            raise click.ClickException(f"no event log at {path} yet: start the daemon first")
        time.sleep(0.2)
    with open(path, "rb") as f:
        recent: deque[bytes] = deque(maxlen=max(lines, 0) or None)
        for raw in f:
            if not raw.endswith(b"\n"):
                f.seek(-len(raw), os.SEEK_CUR)
                break
            try:
                if keep(orjson.loads(raw)):
                    recent.append(raw)
            except orjson.JSONDecodeError:
                continue
        if lines == 0:
            recent.clear()
        for raw in recent:
            emit(raw)
        if not follow:
            return
        buf = b""
        try:
            while True:
                chunk = f.readline()
                if not chunk:
                    time.sleep(0.1)
                    continue
                buf += chunk
                if buf.endswith(b"\n"):
                    emit(buf)
                    buf = b""
        except KeyboardInterrupt:
            return
