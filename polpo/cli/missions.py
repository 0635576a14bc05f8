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
from polpo.cli.templating import PARAM_HELP, checked, duplicate_or_none, fill_or_none, target_name_for


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help=PARAM_HELP)
@config_option
def validate(files: tuple[str, ...], params: tuple[str, ...], config_path: str | None) -> None:
    """Check mission files without running them. Exit 1 if any is invalid.

    Each problem is printed as `FILE: $.json.path: reason`. Agent names are checked against the config's
    agents when a config is found. A Polpo workflow/playbook template is checked as it would be submitted:
    filled with --param values and its defaults.
    """
    from polpo.config_paths import config_path as resolve_config
    from polpo.mission.loader import format_problems, load_mission

    known: list[str] | None = None
    channels: set[str] | None = None
    if config_path or resolve_config(None).exists():
        cfg = load_config_or_exit(config_path)
        known, channels = sorted(cfg.agents), set(cfg.channels)
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
        filled, template = fill_or_none(name, raw, params)
        if filled is None:
            bad += 1
            continue
        result = checked(load_mission(filled, known_agents=known), template, channels)
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
@click.option("--name", help="File name in the missions folder (default: the file's own name; a template's own "
                             "name).")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help=PARAM_HELP)
@click.option("--force", is_flag=True, help="Start a new run even if these exact bytes already ran.")
@click.option("--no-validate", is_flag=True, help="Write the file even if it does not validate.")
@config_option
def submit(file: str, name: str | None, params: tuple[str, ...], force: bool, no_validate: bool,
           config_path: str | None) -> None:
    """Put a mission file into the watched folder atomically (temp file + rename).

    The file is validated first, so mistakes show here rather than only in the log. A Polpo workflow or
    playbook template is filled first (--param NAME=VALUE, defaults for the rest) and the filled mission is
    written, as <template name>.json unless --name is given. Bytes that already ran from that file start
    nothing in the daemon: submit says which run they match; --force makes the daemon forget that run, so
    the same bytes start a new one (NAME#2).
    """
    from polpo.mission.loader import format_problems, load_mission

    cfg = load_config_or_exit(config_path)
    raw, template = fill_or_none(file, Path(file).read_bytes(), params)
    if raw is None:
        raise click.ClickException("not submitted: fix the problems above")
    if not no_validate:
        result = checked(load_mission(raw, known_agents=sorted(cfg.agents)), template, set(cfg.channels))
        for w in result.warnings:
            click.echo(f"{file}: warning: {w}", err=True)
        if result.spec is None:
            for line in format_problems(file, result.problems):
                click.echo(line)
            raise click.ClickException("not submitted: fix the problems above (or pass --no-validate)")
    target_name = name or target_name_for(file, template)
    if not target_name.endswith(".json") or target_name.startswith(".") or "/" in target_name:
        raise click.ClickException("the name must end in .json, not start with a dot, and have no /")
    folder = cfg.missions_dir
    target = folder / target_name
    again = [a for p in params for a in ("--param", p)] + (["--name", name] if name else []) + (
        ["--config", config_path] if config_path else [])
    duplicate_or_none(cfg, os.path.abspath(target), raw, force=force, again=["polpo", "submit", file, *again])
    folder.mkdir(parents=True, exist_ok=True)
    _write_atomically(folder, target_name, raw)
    click.echo(f"submitted {target}" + (f" (filled from {file})" if template is not None else ""))
    click.echo(f"follow it: polpo tail -f --mission {Path(target_name).stem}"
               + (f" --config {config_path}" if config_path else ""))


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
