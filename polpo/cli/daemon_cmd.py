"""``polpo daemon``.

Imports inside the command functions are lazy on purpose: each command loads only what it uses, so quick
commands start fast.
"""

from __future__ import annotations

import sys

import click

from polpo.cli.common import config_option, load_config_or_exit, polpo_command


@click.command()
@config_option
@click.option("--archive-log", is_flag=True,
              help="Go on with a store the event log was not written from (its database was deleted or replaced): "
                   "move events.jsonl aside and begin a new log. Missions-folder files that store has not seen "
                   "are admitted, and run, again.")
def daemon(config_path: str | None, archive_log: bool) -> None:
    """Run the daemon in the foreground until SIGTERM/SIGINT.

    It watches [daemon] missions_dir, keeps its state in [daemon] state_dir (SQLite + events.jsonl) and
    resumes unfinished missions after a restart or a crash.
    """
    from polpo.daemon import Daemon, run_daemon

    cfg = load_config_or_exit(config_path)
    created = not cfg.missions_dir.exists()  # the intake creates it; a typo'd path must not be watched silently

    def ready(d: Daemon) -> None:  # only once every start-up check has passed
        api = f"; API and web view at {d.http.url}" if d.http is not None else ""
        if created:
            click.echo(f"polpo: warning: the missions folder {cfg.missions_dir} did not exist and was created; "
                       f"if that is a typo, fix [daemon] missions_dir in {cfg.source}", err=True)
        click.echo(f"polpo: watching {cfg.missions_dir}; state in {cfg.state_dir}; log {cfg.events_path}{api}",
                   err=True)
        click.echo(f"polpo: follow it with `{polpo_command()} tail -f --config {cfg.source}`", err=True)

    sys.exit(run_daemon(cfg, on_ready=ready, archive_log=archive_log))
