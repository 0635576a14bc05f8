"""Acting on running work: ``polpo retry``, ``polpo cancel``, ``polpo approve``.

When the daemon serves the HTTP API (``[http] listen``), the command goes through it and the daemon answers at
once; otherwise (or if the API does not answer) it is queued in the store's command inbox, which the daemon
polls.

Imports inside the command functions are lazy on purpose: each command loads only what it uses, so quick
commands start fast.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import click

from polpo.cli.common import config_option, load_config_or_exit

_PATHS = {"cancel": "/api/missions/{}/cancel", "retry": "/api/tasks/{}/retry", "approve": "/api/tasks/{}/approve",
          "schedule-pause": "/api/schedules/{}/pause", "schedule-resume": "/api/schedules/{}/resume",
          "schedule-remove": "/api/schedules/{}/remove"}


def _via_api(kind: str, target: str, cfg: Any, pid: int | None) -> bool:
    """True when the daemon's API answered (and the answer was printed or raised)."""
    from polpo.http.client import api_url, call

    base = api_url(cfg.state_dir, pid)
    if base is None:
        return False
    try:
        answer = call(base, "POST", _PATHS[kind].format(target), cfg.http.token_env)
    except OSError:
        return False  # the inbox still works
    message = str(answer.body.get("message") or answer.body.get("detail") or answer.body)
    if answer.status == 200:
        click.echo(message)
        return True
    if answer.status == 401:
        raise click.ClickException(f"the daemon's API needs its token: set ${cfg.http.token_env}")
    if answer.status == 404:
        raise click.ClickException(message)  # the detail says where to look
    raise click.ClickException(message)


def queue_or_call(kind: str, target: str, config_path: str | None) -> None:
    """The command through the daemon's API, else its command inbox (and wait a little for the answer)."""
    _queue(kind, target, config_path)


def _queue(kind: str, target: str, config_path: str | None, **args: Any) -> None:
    """``args``: the command's own arguments (``polpo retry --budget``; None: not given), carried in the target
    (:mod:`polpo.command_args`); such a command goes through the inbox (the API's routes take none)."""
    from polpo.command_args import encode
    from polpo.daemon_probe import daemon_pid
    from polpo.store import read

    cfg = load_config_or_exit(config_path)
    if all(v is None for v in args.values()) and _via_api(kind, target, cfg, daemon_pid(cfg.state_dir)):
        return
    try:
        con = read.open_reader(cfg)
    except read.NoState as e:
        raise click.ClickException(str(e)) from None
    if kind.startswith("schedule-"):
        exists: dict[str, Any] | None = {"id": target}  # the daemon knows its schedules and refuses unknown ones
    else:
        exists = read.task(con, target) if kind in ("retry", "approve") else read.mission(con, target)
    if exists is None:
        raise click.ClickException(f"no {'task' if kind != 'cancel' else 'mission'} {target!r}; "
                                   "see `polpo status --all`")
    target = exists["id"]
    cid = read.queue_command(con, kind, encode(target, **args), datetime.now(UTC).isoformat())
    if daemon_pid(cfg.state_dir) is None:
        click.echo(f"queued {kind} {target}: no daemon is running; it applies when the daemon starts")
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        row = read.command(con, cid)
        if row and row["status"] != "queued":
            if row["status"] == "refused":
                raise click.ClickException(row["result"])
            click.echo(row["result"])
            return
        time.sleep(0.1)
    click.echo(f"queued {kind} {target}; the daemon has not picked it up yet")


@click.command()
@click.argument("task_id", metavar="TASK")
@click.option("--budget", "usd", type=click.FloatRange(min=0, min_open=True),
              help="the task's LLM budget in USD from now on (a task stopped by its budget)")
@click.option("--tokens", type=click.IntRange(min=1), help="the task's LLM budget in tokens from now on")
@config_option
def retry(task_id: str, usd: float | None, tokens: int | None, config_path: str | None) -> None:
    """Run a failed task again with a fresh retry budget (tasks that failed because of it re-open too)."""
    _queue("retry", task_id, config_path, usd=usd, tokens=tokens)


@click.command()
@click.argument("mission_id", metavar="MISSION")
@config_option
def cancel(mission_id: str, config_path: str | None) -> None:
    """Cancel a running mission: its agents' process groups are killed, open tasks fail."""
    _queue("cancel", mission_id, config_path)


@click.command()
@click.argument("task_id", metavar="TASK")
@config_option
def approve(task_id: str, config_path: str | None) -> None:
    """Let a task with sideEffects run its fix or retry (it waits in awaiting_approval until then)."""
    _queue("approve", task_id, config_path)
