"""The ``polpo`` command line: one module per group of commands, imported only when its command runs.

Quick commands (validate, status, show, tail, schema, metrics) import neither anyio nor litellm, so they answer fast.
"""

from __future__ import annotations

import gc
import importlib
from typing import Any

import click

__all__ = ["main"]

# command → module that defines it (under polpo.cli); in the order `polpo --help` lists them
COMMANDS = {
    "daemon": "daemon_cmd", "validate": "validate_cmd", "submit": "missions", "status": "inspect_cmds",
    "show": "inspect_cmds", "tail": "tail_cmd", "retry": "control", "cancel": "control", "approve": "control",
    "resume": "people_cmd", "reject": "people_cmd", "answer": "people_cmd", "override": "people_cmd",
    "labels": "labels_cmd", "schema": "missions", "metrics": "metrics_cmd", "calibrate": "calibrate_cmd",
    "rejudge": "rejudge_cmd", "schedules": "schedules_cmd",
}
# commands that build pydantic models and start without pydantic's plugin discovery (polpo.cli.pydantic_plugins)
NO_PYDANTIC_PLUGINS = frozenset({"validate", "submit", "schema"})


class LazyGroup(click.Group):
    """Imports a command's module when that command is asked for: `polpo status` does not load `polpo daemon`.

    Start-up speed: run as the process (``polpo …``, ``python -m polpo``), the command's module is imported with
    the garbage collector off, then everything built so far is frozen (``gc.freeze``: never scanned again, by a
    collection or at exit) and the collector is turned back on for the command itself, so `polpo daemon` and
    `polpo tail -f` run with it as usual. Imports create modules and classes, not garbage; scanning them cost
    ~25 ms of `polpo validate`'s start-up. Called from a test (``CliRunner``, ``main.main()``) nothing changes.
    """

    _starting = False  # True from __call__ until the command's module is imported

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._starting = gc.isenabled()
        gc.disable()
        try:
            return super().__call__(*args, **kwargs)
        finally:
            self._end_start_up()

    def _end_start_up(self) -> None:
        if self._starting:
            self._starting = False
            gc.freeze()
            gc.enable()

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*COMMANDS, *super().list_commands(ctx)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        try:
            module = COMMANDS.get(cmd_name)
            if module is None:
                return super().get_command(ctx, cmd_name)
            if self._starting and cmd_name in NO_PYDANTIC_PLUGINS:
                from polpo.cli.pydantic_plugins import skip_discovery

                skip_discovery()
            command: Any = getattr(importlib.import_module(f"polpo.cli.{module}"), cmd_name)
            return command if isinstance(command, click.Command) else None
        finally:
            self._end_start_up()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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
    Judge:      polpo calibrate LABELS.jsonl [--write FILE] [--compare OTHER.toml]
                polpo rejudge TASK|MISSION --judge-config OTHER.toml  (stored work, another judge)
    Act:        polpo retry TASK | cancel MISSION | approve TASK  (retry also releases a task on hold)
    People:     polpo resume MISSION [CHECKPOINT] | reject TASK --reason R | override TASK --pass|--fail
                polpo answer TASK "TEXT"  (an agent's question)
                polpo labels export --out FILE  (overrides as labels for calibrate)
    """

