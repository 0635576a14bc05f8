"""The daemon's operational log (warnings, errors, tracebacks) through structlog: one JSON object per line
when stderr is not a terminal (journald, Loki, a file), readable lines on one. Records from every stdlib
logger (polpo's, litellm's, apscheduler's) go through the same formatter, with the mission and task a task's
run bound as context (:func:`bind_task`), so a warning says which task it is about."""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

import structlog

__all__ = ["bind_task", "configure_oplog"]

FORMAT_ENV = "POLPO_LOG_FORMAT"  # "json" or "console"; default: console on a terminal, JSON otherwise


def _wants_json(stream: TextIO) -> bool:
    chosen = os.environ.get(FORMAT_ENV, "").strip().lower()
    if chosen in ("json", "console"):
        return chosen == "json"
    return not (hasattr(stream, "isatty") and stream.isatty())


def configure_oplog(stream: TextIO | None = None, level: int = logging.WARNING) -> None:
    """Route every stdlib log record to ``stream`` (stderr) through structlog's formatter."""
    out = stream if stream is not None else sys.stderr
    as_json = _wants_json(out)
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if as_json
        else structlog.dev.ConsoleRenderer(colors=False, pad_event_to=0))
    pre_chain: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    final: list[structlog.typing.Processor] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if as_json:
        final.append(structlog.processors.format_exc_info)  # a traceback as one string field, not many lines
    formatter = structlog.stdlib.ProcessorFormatter(foreign_pre_chain=pre_chain, processors=[*final, renderer])
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


def bind_task(mission_id: str, task_id: str) -> None:
    """Bind a task's ids to the current context (an anyio task's own copy): its log records carry them."""
    structlog.contextvars.bind_contextvars(mission=mission_id, task=task_id)
