"""The daemon's signals: SIGTERM/SIGINT stop it (a second one stops the running agents at once), SIGHUP
reopens the event log. Each stop signal says on the terminal and in the journal what the daemon waits for."""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import anyio
from anyio.abc import TaskStatus

__all__ = ["StopControls", "first_stop_message", "receive_signals", "second_stop_message"]

log = logging.getLogger("polpo.daemon")
SHOWN = 5  # task ids named in a stop message; the rest are counted


@dataclass(frozen=True)
class StopControls:
    """What a signal acts on: the daemon's stop, its log, and its running agents."""

    request_stop: Callable[[], None]
    reopen_log: Callable[[], None]
    running: Callable[[], Sequence[str]]  # task ids whose agents run now
    cut_grace: Callable[[], Sequence[str]]  # end the shutdown grace now; the task ids being stopped
    grace: float  # [daemon] shutdown_grace, seconds
    say: Callable[[str], None] | None = None  # the daemon's console, in its own line format (else the log)


def _named(task_ids: Sequence[str]) -> str:
    more = len(task_ids) - SHOWN
    return ", ".join(task_ids[:SHOWN]) + (f" and {more} more" if more > 0 else "")


def first_stop_message(running: Sequence[str], grace: float) -> str:
    if not running:
        return "stopping: no agent is running"
    return (f"stopping: waiting up to {grace:g} s for {len(running)} running agent(s) to finish "
            f"({_named(running)}); stop again (Ctrl-C) to stop them now")


def second_stop_message(stopped: Sequence[str]) -> str:
    if not stopped:
        return "stopping now: no agent is running; finishing the shutdown"
    return (f"stopping now: stopping {len(stopped)} agent(s) ({_named(stopped)}); "
            "their tasks run again at the next start")


async def receive_signals(controls: StopControls, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
                          ) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        task_status.started()  # the handlers are installed
        stops = 0
        async for sig in signals:
            if sig == signal.SIGHUP:
                controls.reopen_log()
                continue
            stops += 1
            say = controls.say or log.warning
            if stops == 1:
                say(first_stop_message(sorted(controls.running()), controls.grace))
                controls.request_stop()
            else:
                say(second_stop_message(sorted(controls.cut_grace())))
