"""What every command shares: the --config option, loading the config, JSON output, terminal-safe text.

Imports inside the command functions are lazy on purpose: each command loads only what it uses, so quick
commands start fast.
"""

from __future__ import annotations

import sys
from typing import Any

import click

__all__ = ["CONFIG_HELP", "config_option", "load_config_or_exit", "locate_or_exit", "print_json", "term"]

CONFIG_HELP = "Config file (default: $POLPO_CONFIG or config/polpo.toml)."


def config_option(f: Any) -> Any:
    return click.option("--config", "config_path", metavar="PATH", default=None, help=CONFIG_HELP)(f)


def load_config_or_exit(config_path: str | None) -> Any:
    from polpo.config import ConfigError, load_config

    try:
        return load_config(config_path)
    except ConfigError as e:
        raise click.ClickException(str(e)) from None


def locate_or_exit(config_path: str | None) -> Any:
    """Where the config puts the state (paths and store only, without validating the whole config: fast)."""
    from polpo.config_paths import ConfigNotFound, locate

    try:
        return locate(config_path)
    except ConfigNotFound as e:
        raise click.ClickException(str(e)) from None


def print_json(obj: Any) -> None:
    import orjson

    sys.stdout.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n")


def term(text: object) -> str:
    """Text from a file or the store, for a terminal: control characters escaped as the console and
    `polpo tail` show them (a title cannot clear the screen or forge a line), lone surrogates escaped as the
    event pipeline does (inline here: importing it would load pydantic and the event catalog for every command;
    tests/unit/test_cli_term.py keeps the two the same)."""
    from polpo.events.render import safe

    s = str(text)
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        s = s.encode("utf-8", "backslashreplace").decode("utf-8")
    return safe(s)


def polpo_command() -> str:
    """How to run polpo again as the user just did: ``polpo`` when that is on the PATH, else the path they ran
    (``.venv/bin/polpo`` after the quick start, which puts nothing on the PATH), for hints to copy."""
    import os
    import shutil
    import sys

    ran = sys.argv[0] if sys.argv and os.path.basename(sys.argv[0]) == "polpo" else ""
    if not ran:
        return "polpo"  # run as `python -m polpo` or embedded: the name the docs use
    found = shutil.which("polpo")
    if found and os.path.realpath(found) == os.path.realpath(ran):
        return "polpo"
    rel = os.path.relpath(os.path.abspath(ran))
    return rel if not rel.startswith("..") else os.path.abspath(ran)
