"""Mission files: ``polpo validate``, ``polpo submit``, ``polpo schema``.

Imports inside the command functions are lazy on purpose: each command loads only what it uses, so quick
commands start fast.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from polpo.cli.common import config_option, load_config_or_exit, print_json


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@config_option
def validate(files: tuple[str, ...], config_path: str | None) -> None:
    """Check mission files without running them. Exit 1 if any is invalid.

    Each problem is printed as `FILE: $.json.path: reason`. Agent names are checked against the config's
    agents when a config is found.
    """
    from polpo.config import config_path as resolve_config
    from polpo.mission.loader import format_problems, load_mission

    known: list[str] | None = None
    if config_path or resolve_config(None).exists():
        known = sorted(load_config_or_exit(config_path).agents)
    else:
        click.echo(f"polpo: no config at {resolve_config(None)}; agent names are not checked", err=True)
    bad = 0
    for name in files:
        try:
            raw = Path(name).read_bytes()
        except OSError as e:
            click.echo(f"{name}: $: cannot read the file: {e.strerror}")
            bad += 1
            continue
        result = load_mission(raw, known_agents=known)
        for w in result.warnings:
            click.echo(f"{name}: warning: {w}", err=True)
        if result.spec is None:
            bad += 1
            for line in format_problems(name, result.problems):
                click.echo(line)
        else:
            click.echo(f"{name}: ok ({len(result.spec.tasks)} task(s))")
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
    from polpo.mission.loader import format_problems, load_mission

    cfg = load_config_or_exit(config_path)
    raw = Path(file).read_bytes()
    if not no_validate:
        result = load_mission(raw, known_agents=sorted(cfg.agents))
        if result.spec is None:
            for line in format_problems(file, result.problems):
                click.echo(line)
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
