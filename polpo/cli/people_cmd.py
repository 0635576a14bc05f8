"""A person's say in running work: ``polpo resume`` (a checkpoint), ``polpo reject`` (a task awaiting approval or
review, or its agent's tool call), ``polpo answer`` (its agent's question), ``polpo override`` (a task's verdict),
each with who said it (``--by``, default the login name) and why.

Like ``polpo approve``: through the daemon's API when it serves one, else queued in the store's command inbox
(the target and what the person said travel as one JSON text, :mod:`polpo.command_args`). Imports are lazy so
the command starts fast.
"""

from __future__ import annotations

import click

from polpo.cli.common import config_option
from polpo.cli.send import send, who

__all__ = ["answer", "override", "reject", "resume"]


@click.command()
@click.argument("mission_id", metavar="MISSION")
@click.argument("checkpoint", required=False)
@click.option("--note", help="What you checked, or why you let it go on (kept with checkpoint:resumed).")
@click.option("--by", help="Who resumes it (default: your login name).")
@config_option
def resume(mission_id: str, checkpoint: str | None, note: str | None, by: str | None,
           config_path: str | None) -> None:
    """Release a mission's checkpoint (all it is paused at, without CHECKPOINT): its blocked tasks may run."""
    send("resume", "mission", mission_id, "/api/missions/{}/resume", config_path,
         args={"checkpoint": checkpoint, "note": note, "by": who(by)})


@click.command()
@click.argument("task_id", metavar="TASK")
@click.option("--reason", required=True,
              help="Why: the task fails with it (a reviewed one's next attempt is told; a tool call: its agent is).")
@click.option("--score", type=click.FloatRange(1, 5), default=None,
              help="A task awaiting review: your score, 1..5 (default 1), kept with the label.")
@click.option("--by", help="Who rejects it (default: your login name).")
@config_option
def reject(task_id: str, reason: str, score: float | None, by: str | None, config_path: str | None) -> None:
    """Refuse a task that waits for approval before it starts (it fails with the reason, its agent never runs),
    the tool call its agent waits to make (the agent is told the reason and goes on without it), or fail one
    awaiting review (the judge could not tell): it goes on as after a failed assessment — a fix told your reason,
    a retry, or the end."""
    send("reject", "task", task_id, "/api/tasks/{}/reject", config_path,
         args={"reason": reason, "score": score, "by": who(by)})


@click.command()
@click.argument("task_id", metavar="TASK")
@click.argument("text", metavar="ANSWER")
@click.option("--by", help="Who answers (default: your login name).")
@config_option
def answer(task_id: str, text: str, by: str | None, config_path: str | None) -> None:
    """Answer the question a task's agent asked (`polpo status` shows it): the agent goes on with the answer — an
    LLM agent from where it asked, a command agent run again with the answer in its prompt."""
    send("answer", "task", task_id, "/api/tasks/{}/answer", config_path, args={"answer": text, "by": who(by)})


@click.command()
@click.argument("task_id", metavar="TASK")
@click.option("--pass", "verdict", flag_value="pass", help="The work is good, whatever its checks said.")
@click.option("--fail", "verdict", flag_value="fail", help="The work is not good, whatever its checks said.")
@click.option("--reason", required=True, help="Why (kept with the judge's scores, exported as a label).")
@click.option("--score", type=click.FloatRange(1, 5), default=None,
              help="Your score, 1..5 (default: 5 with --pass, 1 with --fail); what the label gives calibrate.")
@click.option("--by", help="Who overrides it (default: your login name).")
@config_option
def override(task_id: str, verdict: str | None, reason: str, score: float | None, by: str | None,
             config_path: str | None) -> None:
    """Override a finished task's verdict: stored beside the judge's scores, shown by `polpo show`, exported by
    `polpo labels export` for `polpo calibrate --labels`. A pass of failed work makes the task done and runs what
    failed because of it. On a task awaiting review it is the person's verdict, as `polpo approve` / `reject`."""
    if verdict is None:
        raise click.UsageError("give --pass or --fail")
    send("override", "task", task_id, "/api/tasks/{}/override", config_path,
         args={"passed": verdict == "pass", "reason": reason, "score": score, "by": who(by)})
