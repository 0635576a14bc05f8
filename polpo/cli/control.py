"""Acting on running work: ``polpo retry``, ``polpo cancel``, ``polpo approve``.

When the daemon serves the HTTP API (``[http] listen``), the command goes through it and the daemon answers at
once; otherwise (or if the API does not answer) it is queued in the store's command inbox, which the daemon
polls.

Imports inside the command functions are lazy on purpose: each command loads only what it uses, so quick
commands start fast.
"""

from __future__ import annotations

import click

from polpo.cli.common import config_option
from polpo.cli.send import send, who


@click.command()
@click.argument("task_id", metavar="TASK")
@click.option("--budget", "usd", type=click.FloatRange(min=0, min_open=True),
              help="the task's LLM budget in USD from now on (a task stopped by its budget)")
@click.option("--tokens", type=click.IntRange(min=1), help="the task's LLM budget in tokens from now on")
@config_option
def retry(task_id: str, usd: float | None, tokens: int | None, config_path: str | None) -> None:
    """Run a failed task again with a fresh retry budget (tasks that failed because of it re-open too)."""
    send("retry", "task", task_id, "/api/tasks/{}/retry", config_path, args={"usd": usd, "tokens": tokens})


@click.command()
@click.argument("mission_id", metavar="MISSION")
@config_option
def cancel(mission_id: str, config_path: str | None) -> None:
    """Cancel a running mission: its agents' process groups are killed, open tasks fail."""
    send("cancel", "mission", mission_id, "/api/missions/{}/cancel", config_path)


@click.command()
@click.argument("task_id", metavar="TASK")
@click.option("--note", help="What you checked (kept with the approval; with a review, its label's reason).")
@click.option("--score", type=click.FloatRange(1, 5), default=None,
              help="A task awaiting review: your score, 1..5 (default: the panel's for the task, 5 for the label).")
@click.option("--by", help="Who approves it (default: your login name).")
@config_option
def approve(task_id: str, note: str | None, score: float | None, by: str | None, config_path: str | None) -> None:
    """Let a task waiting for a person go on: one with "approval": "before" starts, one with sideEffects runs
    its fix or retry, one whose agent waits to make a tool call (approve_tools) makes it, and one awaiting review
    (the judge could not tell) passes: it is done."""
    send("approve", "task", task_id, "/api/tasks/{}/approve", config_path,
         args={"note": note, "score": score, "by": who(by)})
