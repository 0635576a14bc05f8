"""``polpo daemon``.

Imports inside the command functions are lazy on purpose: each command loads only what it uses, so quick
commands start fast.
"""

from __future__ import annotations

import gc
import logging
import os
import shutil
import signal
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from polpo.cli.common import config_option, load_config_or_exit, polpo_command

if TYPE_CHECKING:
    from polpo.config import Config
    from polpo.daemon import Daemon


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

    code = run_daemon(cfg, on_ready=ready, archive_log=archive_log)
    # the process ends here, its work done: the interpreter's last collection of every object (litellm's modules
    # are many) kept it up ~9 s past its shutdown on a loaded machine; frozen, they go with the process
    # (scripts/bench_stop.py)
    gc.freeze()
    sys.exit(code)


def run_daemon(cfg: Config, on_ready: Callable[[Daemon], None] | None = None, *,
               archive_log: bool = False) -> int:
    """Run the daemon until it stops; its exit code (1 with one line on stderr saying why it could not go on)."""
    import anyio

    from polpo.config import ConfigError
    from polpo.daemon import Daemon, DaemonError
    from polpo.daemon_locks import FolderInUse, StateInUse
    from polpo.extras import MissingExtra
    from polpo.oplog import configure_oplog
    from polpo.store.protocol import StoreError
    from polpo.tools.orphans import become_subreaper

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    configure_oplog()  # JSON lines when stderr is not a terminal (journald, Loki), readable on one
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # it logs every tick at INFO
    become_subreaper()  # orphans that left their attempt's group come back to the daemon, which ends them
    # a logrotate SIGHUP while the daemon starts must not end it (the default action): ignored until its own
    # handler reopens the log (polpo.stop_signals); a log moved meanwhile is reopened at the next write anyway
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        daemon = Daemon(cfg, on_ready=on_ready, archive_log=archive_log)
        anyio.run(daemon.run, backend="asyncio")
    except (DaemonError, ConfigError, StoreError, MissingExtra, StateInUse, FolderInUse) as e:  # e.g. no PostgreSQL
        print(f"polpo: {e}", file=sys.stderr)
        return 1
    except (OSError, sqlite3.Error) as e:  # the state folder cannot be created, locked or written
        where = getattr(e, "filename", None) or cfg.state_dir
        hint = ("its file system is full: free space there (a service manager starts polpo again)"
                if _full(cfg.state_dir) else "check that it is a folder this user may write, or set [daemon] state_dir")
        print(f"polpo: cannot use the state folder {cfg.state_dir} ({where}: {getattr(e, 'strerror', None) or e}); "
              f"{hint}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def _full(folder: Path) -> bool:
    """Whether ``folder``'s file system has (next to) no space left: SQLite then says "unable to open database
    file" (its WAL index cannot grow), which alone sends a person to check permissions."""
    try:
        return shutil.disk_usage(folder).free < 64 * 1024
    except OSError:
        return False
