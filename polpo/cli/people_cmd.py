"""A person's say in running work: ``polpo resume`` (a checkpoint), ``polpo reject`` (a task awaiting approval),
``polpo override`` (a task's verdict), each with who said it (``--by``, default the login name) and why.

Like ``polpo approve``: through the daemon's API when it serves one, else queued in the store's command inbox
(the target and what the person said travel as one JSON text, :mod:`polpo.command_args`). Imports are lazy so
the command starts fast.
"""

from __future__ import annotations

import getpass
import time
from datetime import UTC, datetime
from typing import Any

import click

from polpo.cli.common import config_option, load_config_or_exit

__all__ = ["override", "reject", "resume"]


def _who(by: str | None) -> str:
    if by:
        return by
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "user"


def _via_api(path: str, body: dict[str, Any], cfg: Any, pid: int | None) -> bool:
    from polpo.http.client import api_url, call

    base = api_url(cfg.state_dir, pid)
    if base is None:
        return False
    try:
        answer = call(base, "POST", path, cfg.http.token_env, body=body)
    except OSError:
        return False  # the inbox still works
    message = str(answer.body.get("message") or answer.body)
    if answer.status == 200:
        click.echo(message)
        return True
    if answer.status == 401:
        raise click.ClickException(f"the daemon's API needs its token: set ${cfg.http.token_env}")
    if answer.status == 404:
        raise click.ClickException(f"{message}; see `polpo status --all`")
    raise click.ClickException(message)


def _send(kind: str, what: str, ident: str, path: str, args: dict[str, Any], config_path: str | None) -> None:
    from polpo.command_args import encode
    from polpo.daemon_probe import daemon_pid
    from polpo.store import read

    cfg = load_config_or_exit(config_path)
    if _via_api(path.format(ident), {k: v for k, v in args.items() if v is not None}, cfg,
                daemon_pid(cfg.state_dir)):
        return
    try:
        con = read.open_reader(cfg)
    except read.NoState as e:
        raise click.ClickException(str(e)) from None
    row = read.mission(con, ident) if what == "mission" else read.task(con, ident)
    if row is None:
        raise click.ClickException(f"no {what} {ident!r}; see `polpo status --all`")
    cid = read.queue_command(con, kind, encode(row["id"], **args), datetime.now(UTC).isoformat())
    if daemon_pid(cfg.state_dir) is None:
        click.echo(f"queued {kind} {row['id']}: no daemon is running; it applies when the daemon starts")
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        done = read.command(con, cid)
        if done and done["status"] != "queued":
            if done["status"] == "refused":
                raise click.ClickException(done["result"])
            click.echo(done["result"])
            return
        time.sleep(0.1)
    click.echo(f"queued {kind} {row['id']}; the daemon has not picked it up yet")


@click.command()
@click.argument("mission_id", metavar="MISSION")
@click.argument("checkpoint", required=False)
@click.option("--note", help="What you checked, or why you let it go on (kept with checkpoint:resumed).")
@click.option("--by", help="Who resumes it (default: your login name).")
@config_option
def resume(mission_id: str, checkpoint: str | None, note: str | None, by: str | None,
           config_path: str | None) -> None:
    """Release a mission's checkpoint (all it is paused at, without CHECKPOINT): its blocked tasks may run."""
    _send("resume", "mission", mission_id, "/api/missions/{}/resume",
          {"checkpoint": checkpoint, "note": note, "by": _who(by)}, config_path)


@click.command()
@click.argument("task_id", metavar="TASK")
@click.option("--reason", required=True, help="Why: the task fails with it.")
@click.option("--by", help="Who rejects it (default: your login name).")
@config_option
def reject(task_id: str, reason: str, by: str | None, config_path: str | None) -> None:
    """Refuse a task that waits for approval before it starts: it fails with the reason, its agent never runs."""
    _send("reject", "task", task_id, "/api/tasks/{}/reject", {"reason": reason, "by": _who(by)}, config_path)


@click.command()
@click.argument("task_id", metavar="TASK")
@click.option("--pass", "verdict", flag_value="pass", help="The work is good, whatever the judge said.")
@click.option("--fail", "verdict", flag_value="fail", help="The work is not good, whatever the judge said.")
@click.option("--reason", required=True, help="Why (kept with the judge's scores, exported as a label).")
@click.option("--score", type=click.FloatRange(1, 5), default=None,
              help="Your score, 1..5 (default: 5 with --pass, 1 with --fail); what the label gives calibrate.")
@click.option("--by", help="Who overrides it (default: your login name).")
@config_option
def override(task_id: str, verdict: str | None, reason: str, score: float | None, by: str | None,
             config_path: str | None) -> None:
    """Override a finished task's verdict: stored beside the judge's scores, shown by `polpo show`, exported by
    `polpo labels export` for `polpo calibrate --labels`."""
    if verdict is None:
        raise click.UsageError("give --pass or --fail")
    _send("override", "task", task_id, "/api/tasks/{}/override",
          {"passed": verdict == "pass", "reason": reason, "score": score, "by": _who(by)}, config_path)
