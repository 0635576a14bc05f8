"""``polpo validate``: the daemon's own check of mission files, without running them.

This module is imported only when ``validate`` (or ``submit``) runs, so it imports what the check needs at the
top: :class:`polpo.cli.LazyGroup` imports it with the garbage collector off and then freezes what it built, so
none of it is scanned again. Nothing here may import the engine, the store, asyncio or litellm
(tests/unit/test_cli_startup.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from polpo.cli.common import config_option, load_config_or_exit, term
from polpo.cli.templating import PARAM_HELP, fill_or_none, in_template, target_name_for
from polpo.config import DEFAULT_MAX_MISSION_BYTES
from polpo.config_paths import config_path as resolve_config
from polpo.intake.check import MAX_REPORTED, Policy, cap, check_mission, unreadable
from polpo.intake.reader import Unreadable, read_mission_file
from polpo.mission.loader import format_problems
from polpo.mission.security import policy_problems

__all__ = ["policy_for", "validate"]


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help=PARAM_HELP)
@click.option("--all", "show_all", is_flag=True, help="List every problem (default: the first 50 of each file).")
@config_option
def validate(files: tuple[str, ...], params: tuple[str, ...], show_all: bool, config_path: str | None) -> None:
    """Check mission files without running them. Exit 1 if any is invalid.

    Each problem is printed as `FILE: $.json.path: reason`. The check is the daemon's own (size limit,
    loader, notification channels, [security] policy, the stored form read back), so a file that passes here
    is accepted by the daemon with the same config. Agent and channel names and the policy are checked when a
    config is found. A Polpo workflow/playbook template is checked as it would be submitted: filled with
    --param values and its defaults.
    """
    known: list[str] | None = None
    channels: set[str] | None = None
    cfg = None
    max_bytes = DEFAULT_MAX_MISSION_BYTES
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
        if isinstance(content, Unreadable):
            bad += 1
            for line in format_problems(name, unreadable(content).problems):
                click.echo(term(line))
            continue
        filled, template = fill_or_none(name, content, params)
        if filled is None:
            bad += 1
            continue
        policy: Policy | None = None
        if cfg is not None:
            policy = policy_for(cfg, cfg.missions_dir / target_name_for(name, template))
        verdict = in_template(check_mission(filled, known_agents=known, channels=channels, policy=policy,
                                            judge=None if cfg is None else bool(cfg.judge.panel_models())),
                              template)
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


def policy_for(cfg: Any, mission_file: Path) -> Policy:
    """The config's [security] policy for a mission the daemon will read from ``mission_file``."""
    return lambda spec: policy_problems(spec, cfg, mission_file)
