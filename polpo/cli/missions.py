"""Mission files: ``polpo submit``, ``polpo schema`` (``polpo validate`` is :mod:`polpo.cli.validate_cmd`).

Imports inside the command functions are lazy on purpose: each command loads only what it uses, so quick
commands start fast.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import click

from polpo.cli.common import config_option, load_config_or_exit, polpo_command, print_json, term
from polpo.cli.templating import PARAM_HELP, duplicate_or_none, fill_or_none, in_template, target_name_for


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--name", help="File name in the missions folder (default: the file's own name; a template's own "
                             "name).")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help=PARAM_HELP)
@click.option("--force", is_flag=True, help="Start a new run even if these exact bytes already ran.")
@click.option("--no-validate", is_flag=True, help="Write the file even if it does not validate.")
@click.option("--wait", "wait", type=click.FloatRange(min=0), default=10.0, show_default=True, metavar="SECONDS",
              help="How long to wait for the running daemon's verdict on the file (0: do not wait).")
@config_option
def submit(file: str, name: str | None, params: tuple[str, ...], force: bool, no_validate: bool, wait: float,
           config_path: str | None) -> None:
    """Put a mission file into the watched folder atomically (temp file + rename).

    The file is validated first, so mistakes show here rather than only in the log. A Polpo workflow or
    playbook template is filled first (--param NAME=VALUE, defaults for the rest) and the filled mission is
    written, as <template name>.json unless --name is given. Bytes that already ran from that file start
    nothing in the daemon: submit says which run they match; --force makes the daemon forget that run, so
    the same bytes start a new one (NAME#2). When a daemon is running, submit then waits (--wait seconds) for
    its verdict and prints it: the mission it started, the schedule it made, or why it rejected the file.
    """
    from polpo.cli.validate_cmd import policy_for
    from polpo.intake.check import cap, check_mission
    from polpo.intake.reader import Unreadable, read_mission_file
    from polpo.mission.loader import format_problems

    cfg = load_config_or_exit(config_path)
    raw = read_mission_file(Path(file), cfg.daemon.max_mission_bytes)  # never blocks on a FIFO
    if raw is None or isinstance(raw, Unreadable):
        raise click.ClickException(f"{term(file)}: " + ("no such file" if raw is None else raw.message))
    filled, template = fill_or_none(file, raw, params)
    if filled is None:
        raise click.ClickException("not submitted: fix the problems above")
    raw = filled
    target_name = name or target_name_for(file, template)
    if not target_name.endswith(".json") or target_name.startswith(".") or "/" in target_name:
        raise click.ClickException("the name must end in .json, not start with a dot, and have no /")
    folder = cfg.missions_dir
    target = folder / target_name
    if not no_validate:
        verdict = in_template(check_mission(raw, known_agents=sorted(cfg.agents), channels=set(cfg.channels),
                                            policy=policy_for(cfg, target),
                                            judge=bool(cfg.judge.panel_models())), template)
        for w in verdict.warnings:
            click.echo(term(f"{file}: warning: {w}"), err=True)
        if verdict.spec is None:
            shown, more = cap(verdict.problems)
            for line in format_problems(file, shown):
                click.echo(term(line))
            if more:
                click.echo(f"{term(file)}: … and {more} more problem(s) (`polpo validate --all` lists every one)")
            raise click.ClickException("not submitted: fix the problems above (or pass --no-validate)")
    again = [a for p in params for a in ("--param", p)] + (["--name", name] if name else []) + (
        ["--config", config_path] if config_path else [])
    duplicate_or_none(cfg, os.path.abspath(target), raw, force=force, again=["polpo", "submit", file, *again])
    folder.mkdir(parents=True, exist_ok=True)
    watcher = _Watcher.start(cfg, wait)
    _write_atomically(folder, target_name, raw)
    click.echo(f"submitted {target}" + (f" (filled from {file})" if template is not None else ""))
    follow = f"{polpo_command()} tail -f --mission {Path(target_name).stem}" + (
        f" --config {config_path}" if config_path else "")
    if watcher is None or isinstance(watcher, str):
        if watcher:
            click.echo(watcher)
        click.echo(f"follow it: {follow}")
        return
    watcher.report(target_name, hashlib.sha256(raw).hexdigest(), wait, follow)


class _Watcher:
    """The store's events, read from the last one before the file was written (a daemon must be running)."""

    def __init__(self, con: Any, after: int) -> None:
        self.con = con
        self.after = after

    @classmethod
    def start(cls, cfg: Any, wait: float) -> _Watcher | str | None:
        """The watcher; else what to say instead of a verdict (None: nothing)."""
        from polpo.daemon_probe import daemon_pid
        from polpo.store import read

        if daemon_pid(cfg.state_dir) is None:
            return f"no daemon is running here: it takes the file in when it starts ({polpo_command()} daemon)"
        if wait <= 0:
            return None
        try:
            con = read.open_reader(cfg)
            return cls(con, read.last_event_seq(con))
        except (read.NoState, OSError):
            return None  # the verdict cannot be read here: the file is written all the same

    def report(self, name: str, digest: str, wait: float, follow: str) -> None:
        from polpo.cli.submit_wait import await_verdict, describe
        from polpo.store import read

        try:
            verdict = await_verdict(lambda seq: read.events(self.con, seq), self.after, name, digest,
                                    timeout=wait)
        except Exception as e:  # the store went away meanwhile: the file is written all the same
            click.echo(f"cannot read the daemon's verdict ({e}); follow it: {follow}")
            return
        finally:
            self.con.close()
        if verdict is None:
            click.echo(f"the daemon has not taken it in after {wait:g} s (is it paused or very busy?); "
                       f"follow it: {follow}")
            return
        accepted, lines = describe(verdict)
        for line in lines:
            click.echo(term(line))
        if not accepted:
            raise click.ClickException(f"the file stays in the missions folder; fix it and submit it again "
                                       f"(the log: {follow})")
        click.echo(f"follow it: {follow}")


def _write_atomically(folder: Path, target_name: str, raw: bytes) -> None:
    """Temp file + fsync + rename + fsync of the folder: the daemon sees the whole file once, or nothing."""
    tmp = folder / f".{target_name}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(raw)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, folder / target_name)
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


@click.command()
def schema() -> None:
    """Print the mission file's JSON Schema (for editors)."""
    from polpo.mission.schema import mission_json_schema

    print_json(mission_json_schema())
