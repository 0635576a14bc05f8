"""One way for a CLI command to act on the daemon: through its HTTP API when it serves one (the daemon answers
at once), else through the store's command inbox, which the daemon polls (the answer is awaited a little).

Every acting command (retry, cancel, approve, resume, reject, override, schedules' pause/resume/remove) goes
through :func:`send`. Imports are lazy: quick commands load only what they use."""

from __future__ import annotations

import getpass
import time
from datetime import UTC, datetime
from typing import Any, Literal

import click

from polpo.cli.common import load_config_or_exit

__all__ = ["send", "who"]

Target = Literal["task", "mission", "schedule"]
INBOX_WAIT = 10.0  # seconds the CLI waits for the daemon to answer a queued command


def send(kind: str, what: Target, ident: str, route: str, config_path: str | None, *,
         args: dict[str, Any] | None = None) -> None:
    """``route`` is the API path with ``{}`` for the id; ``args`` the command's own arguments (None values: not
    given), sent as the API's JSON body or carried in the inbox target (:mod:`polpo.command_args`)."""
    from polpo.daemon_probe import daemon_pid

    given = {k: v for k, v in (args or {}).items() if v is not None}
    cfg = load_config_or_exit(config_path)
    if _via_api(route.format(ident), given, cfg, daemon_pid(cfg.state_dir)):
        return
    _via_inbox(kind, what, ident, given, cfg)


def who(by: str | None) -> str:
    """The person a command is from: ``--by``, else the login name."""
    if by:
        return by
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "user"


def _via_api(path: str, body: dict[str, Any], cfg: Any, pid: int | None) -> bool:
    """True when the daemon's API answered (and the answer was printed or raised)."""
    from polpo.http.client import api_url, call

    base = api_url(cfg.state_dir, pid)
    if base is None:
        return False
    try:
        answer = call(base, "POST", path, cfg.http.token_env, body=body)
    except OSError:
        return False  # the inbox still works
    message = str(answer.body.get("message") or answer.body.get("detail") or answer.body)
    if answer.status == 200:
        click.echo(message)
        return True
    if answer.status == 401:
        raise click.ClickException(f"the daemon's API needs its token: set ${cfg.http.token_env}")
    raise click.ClickException(message)  # a refusal or an unknown id: the detail says where to look


def _via_inbox(kind: str, what: Target, ident: str, args: dict[str, Any], cfg: Any) -> None:
    from polpo.command_args import encode
    from polpo.daemon_probe import daemon_pid
    from polpo.store import read

    try:
        con = read.open_reader(cfg)
    except read.NoState as e:
        raise click.ClickException(str(e)) from None
    if what == "schedule":
        row: dict[str, Any] | None = {"id": ident}  # the daemon knows its schedules and refuses unknown ones
    else:
        row = read.task(con, ident) if what == "task" else read.mission(con, ident)
    if row is None:
        raise click.ClickException(f"no {what} {ident!r}; see `polpo status --all`")
    target = row["id"]
    cid = read.queue_command(con, kind, encode(target, **args), datetime.now(UTC).isoformat())
    if daemon_pid(cfg.state_dir) is None:
        click.echo(f"queued {kind} {target}: no daemon is running; it applies when the daemon starts")
        return
    deadline = time.monotonic() + INBOX_WAIT
    while time.monotonic() < deadline:
        done = read.command(con, cid)
        if done and done["status"] != "queued":
            if done["status"] == "refused":
                raise click.ClickException(done["result"])
            click.echo(done["result"])
            return
        time.sleep(0.1)
    click.echo(f"queued {kind} {target}; the daemon has not picked it up yet")
