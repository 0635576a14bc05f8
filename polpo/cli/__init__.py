"""The ``polpo`` command line: one module per group of commands.

Quick commands (validate, status, show, tail, schema, metrics) import neither anyio nor litellm, so they answer fast.
"""

from __future__ import annotations

import click

from polpo.cli.calibrate_cmd import calibrate
from polpo.cli.control import approve, cancel, retry
from polpo.cli.daemon_cmd import daemon
from polpo.cli.inspect_cmds import show, status
from polpo.cli.metrics_cmd import metrics
from polpo.cli.missions import schema, submit, validate
from polpo.cli.tail_cmd import tail

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="polpo")
def main() -> None:
    """polpo — a daemon that turns mission files into assessed work.

    Drop a mission JSON into the missions folder (or use `polpo submit`); the daemon validates it, runs its
    tasks with the configured agents, checks every result and logs every step to <state_dir>/events.jsonl.

    \b
    Start:      polpo daemon --config config/polpo.toml
    Watch:      polpo tail -f            polpo status
    Inspect:    polpo show MISSION|TASK  (add --json for everything)
    Quality:    polpo metrics [--mission ID] [--agent NAME] [--json]
    Judge:      polpo calibrate LABELS.jsonl [--write FILE]
    Act:        polpo retry TASK | cancel MISSION | approve TASK  (retry also releases a task on hold)
    """


for _command in (daemon, validate, submit, status, show, tail, retry, cancel, approve, schema, metrics, calibrate):
    main.add_command(_command)
