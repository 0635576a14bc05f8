"""``polpo schedules``: the scheduled mission files, their next firings, and pause / resume / remove.

A schedule is made by a mission file with a ``schedule`` (docs/how-to/schedules.md); these commands go to the
daemon as ``retry`` and ``cancel`` do (its API, else the store's command inbox).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from polpo.cli.common import config_option, locate_or_exit, print_json, term


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print the schedules as JSON.")
@config_option
@click.pass_context
def schedules(ctx: click.Context, as_json: bool, config_path: str | None) -> None:
    """List scheduled missions with their next run; `pause`, `resume` or `remove` one."""
    if ctx.invoked_subcommand is not None:
        return
    from polpo.store import read
    from polpo.store.schedule_view import schedules_view

    cfg = locate_or_exit(config_path)
    try:
        con = read.open_reader(cfg)
    except read.NoState as e:
        raise click.ClickException(str(e)) from None
    rows = schedules_view(con, datetime.now(UTC))
    if as_json:
        print_json({"schedules": rows})
        return
    if not rows:
        click.echo("no schedules: a mission file with \"schedule\" makes one (docs/how-to/schedules.md)")
        return
    for r in rows:
        click.echo(_line(r))


def _line(r: dict[str, Any]) -> str:
    nxt = r["nextRunAt"] or ("-" if r["status"] != "active" else "none left")
    last = f"  last run {term(r['lastRun'])}" if r.get("lastRun") else ""
    queued = f"  {r['queued']} queued" if r.get("queued") else ""
    return (f"{term(r['id']):<20} {term(r['status']):<7} {term(r['expression']):<20} {term(r['timezone']):<16} "
            f"next {term(nxt)}{last}{queued}")


def _act(kind: str, schedule_id: str, by: str | None, config_path: str | None) -> None:
    from polpo.cli.send import send, who

    send(kind, "schedule", schedule_id, "/api/schedules/{}/" + kind.removeprefix("schedule-"), config_path,
         args={"by": who(by)})


BY = click.option("--by", help="Who does it, for the schedule:changed event (default: your login name).")


@schedules.command()
@click.argument("schedule_id", metavar="SCHEDULE")
@BY
@config_option
def pause(schedule_id: str, by: str | None, config_path: str | None) -> None:
    """Stop a schedule firing until it is resumed (firings due meanwhile are let go)."""
    _act("schedule-pause", schedule_id, by, config_path)


@schedules.command()
@click.argument("schedule_id", metavar="SCHEDULE")
@BY
@config_option
def resume(schedule_id: str, by: str | None, config_path: str | None) -> None:
    """Let a paused schedule fire again, from now on."""
    _act("schedule-resume", schedule_id, by, config_path)


@schedules.command()
@click.argument("schedule_id", metavar="SCHEDULE")
@BY
@config_option
def remove(schedule_id: str, by: str | None, config_path: str | None) -> None:
    """Remove a schedule (its runs so far stay); a new version of its file makes it again."""
    _act("schedule-remove", schedule_id, by, config_path)
