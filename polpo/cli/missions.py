"""Mission files: ``polpo validate``, ``polpo submit``, ``polpo schema``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from polpo.cli.common import config_option, load_config_or_exit, print_json, term


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--all", "show_all", is_flag=True, help="List every problem (default: the first 50 of each file).")
@config_option
def validate(files: tuple[str, ...], show_all: bool, config_path: str | None) -> None:
    """Check mission files without running them. Exit 1 if any is invalid.

    Each problem is printed as `FILE: $.json.path: reason`. The check is the daemon's own (size limit,
    loader, notification channels, the stored form read back), so a file that passes here is accepted by
    the daemon with the same config. Agent and channel names are checked when a config is found.
    """
    from polpo.config import DaemonSettings
    from polpo.config import config_path as resolve_config
    from polpo.intake.check import MAX_REPORTED, cap, check_mission, unreadable
    from polpo.intake.reader import Unreadable, read_mission_file
    from polpo.mission.loader import format_problems

    known: list[str] | None = None
    channels: set[str] | None = None
    max_bytes: int = DaemonSettings.model_fields["max_mission_bytes"].default
    if config_path or resolve_config(None).exists():
        cfg = load_config_or_exit(config_path)
        known, channels, max_bytes = sorted(cfg.agents), set(cfg.channels), cfg.daemon.max_mission_bytes
    else:
        click.echo(f"polpo: no config at {term(resolve_config(None))}; agent names are not checked", err=True)
    bad = 0
    for name in files:
        content = read_mission_file(Path(name), max_bytes)
        if content is None:
            click.echo(f"{term(name)}: $: cannot read the file: no such file")
            bad += 1
            continue
        verdict = (unreadable(content) if isinstance(content, Unreadable)
                   else check_mission(content, known_agents=known, channels=channels))
        for w in verdict.warnings:
            click.echo(term(f"{name}: warning: {w}"), err=True)
        if verdict.spec is None:
            bad += 1
            shown, more = cap(verdict.problems, None if show_all else MAX_REPORTED)
            for line in format_problems(name, shown):
                click.echo(term(line))
            if more:
                click.echo(f"{term(name)}: … and {more} more problem(s) (--all lists every one)")
        else:
            click.echo(f"{term(name)}: ok ({len(verdict.spec.tasks)} task(s))")
    sys.exit(1 if bad else 0)


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--name", help="File name in the missions folder (default: the file's own name).")
@click.option("--no-validate", is_flag=True, help="Write the file even if it does not validate.")
@config_option
def submit(file: str, name: str | None, no_validate: bool, config_path: str | None) -> None:
    """Put a mission file into the watched folder atomically (temp file + rename).

    The file is validated first, so mistakes show here rather than only in the log.
    """
    from polpo.intake.check import cap, check_mission
    from polpo.intake.reader import Unreadable, read_mission_file
    from polpo.mission.loader import format_problems

    cfg = load_config_or_exit(config_path)
    raw = read_mission_file(Path(file), cfg.daemon.max_mission_bytes)  # never blocks on a FIFO
    if raw is None or isinstance(raw, Unreadable):
        raise click.ClickException(f"{term(file)}: " + ("no such file" if raw is None else raw.message))
    if not no_validate:
        verdict = check_mission(raw, known_agents=sorted(cfg.agents), channels=set(cfg.channels))
        if verdict.spec is None:
            shown, more = cap(verdict.problems)
            for line in format_problems(file, shown):
                click.echo(term(line))
            if more:
                click.echo(f"{term(file)}: … and {more} more problem(s) (`polpo validate --all` lists every one)")
            raise click.ClickException("not submitted: fix the problems above (or pass --no-validate)")
    target_name = name or Path(file).name
    if not target_name.endswith(".json") or target_name.startswith("."):
        raise click.ClickException("the name must end in .json and not start with a dot")
    folder = cfg.missions_dir
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / target_name
    tmp = folder / f".{target_name}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(raw)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    click.echo(f"submitted {target}")
    click.echo(f"follow it: polpo tail -f --mission {Path(target_name).stem}"
               + (f" --config {config_path}" if config_path else ""))


@click.command()
def schema() -> None:
    """Print the mission file's JSON Schema (for editors)."""
    from polpo.mission.schema import mission_json_schema

    print_json(mission_json_schema())
