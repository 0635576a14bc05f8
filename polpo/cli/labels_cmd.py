"""``polpo labels export``: people's verdict overrides as a labels file ``polpo calibrate --labels`` reads.

Imports inside the command functions are lazy on purpose, so the command starts fast.
"""

from __future__ import annotations

from pathlib import Path

import click

from polpo.cli.common import config_option, locate_or_exit

__all__ = ["labels"]


@click.group()
def labels() -> None:
    """Labels made by people on real work (verdict overrides), for `polpo calibrate`."""


@labels.command("export")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The labels file to write (JSON lines); workspaces are named relative to it.")
@click.option("--mission", default=None, help="Only this mission's overrides.")
@config_option
def export(out: Path, mission: str | None, config_path: str | None) -> None:
    """Write one label per overridden task: its task, criteria, dimensions, workspace and the person's score."""
    import json

    from polpo.assessment.label_export import label_lines
    from polpo.store import read

    cfg = locate_or_exit(config_path)
    try:
        con = read.open_reader(cfg)
    except (read.NoState, read.Unreachable) as e:
        raise click.ClickException(str(e)) from None
    lines = label_lines(read.overrides_for_labels(con, mission), out.parent)
    if not lines:
        raise click.ClickException("no verdicts by people yet: `polpo override TASK --pass|--fail --reason …` "
                                   "records one, and so does an answer to a task awaiting review (`polpo approve` "
                                   "or `polpo reject`)")
    out.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    click.echo(f"{len(lines)} label(s) written to {out}; measure the judge with `polpo calibrate {out}`")
