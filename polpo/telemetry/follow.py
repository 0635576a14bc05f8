"""What metrics and traces both need to follow from the events: when each task and attempt started, and an
off-the-writer queue for the reads that come after an event (a review panel's traces)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["AttemptEnd", "Follow", "ReviewQueue", "ReviewsFn", "attempt_end", "ts_seconds"]

log = logging.getLogger("polpo.telemetry")

ReviewsFn = Callable[[str, int], Awaitable[list[dict[str, Any]]]]  # (task id, check index) -> stored traces

RUNNING = frozenset({"assigned", "in_progress"})


def attempt_end(old: object, new: object) -> str | None:
    """How a task's transition ``old`` → ``new`` ends its attempt (``passed``, ``failed``, ``interrupted``), or None
    when it does not: the agent still runs, or its verdict waits for a person (``awaiting_review``)."""
    if old in ("review", "awaiting_review"):
        return None if new in ("review", "awaiting_review") else "passed" if new == "done" else "failed"
    return "interrupted" if old in RUNNING and new not in RUNNING | {"review"} else None


def ts_seconds(ts: str) -> float:
    """An event's ``ts`` (ISO-8601, ``Z``) as epoch seconds."""
    return datetime.fromisoformat(ts).timestamp()


@dataclass
class AttemptEnd:
    task_id: str
    number: int | None
    kind: str
    outcome: str  # passed | failed | interrupted
    seconds: float | None


class Follow:
    """Task and attempt start times, from ``task:transition`` events (only what this process has seen)."""

    def __init__(self) -> None:
        self.task_start: dict[str, float] = {}
        self.attempt: dict[str, tuple[float, int | None, str]] = {}  # task -> (start, number, kind)

    def transition(self, task_id: str, data: dict[str, Any], at: float) -> tuple[AttemptEnd | None, float | None]:
        """(the attempt this transition ended, the task's duration if it ended the task)."""
        old, new = data.get("from"), data.get("to")
        if new == "assigned" and data.get("trigger") == "dispatch":
            self.task_start.setdefault(task_id, at)
            self.attempt[task_id] = (at, data.get("attempt"), str(data.get("kind") or "initial"))
        ended: AttemptEnd | None = None
        outcome = attempt_end(old, new)
        if task_id in self.attempt and outcome is not None:
            start, number, kind = self.attempt.pop(task_id)
            ended = AttemptEnd(task_id, number, kind, outcome, at - start)
        task_seconds = None
        if new in ("done", "failed", "cancelled"):  # (a cancelled task's start was kept for good: a leak a task)
            first = self.task_start.pop(task_id, None)
            self.attempt.pop(task_id, None)
            task_seconds = at - first if first is not None and new != "cancelled" else None
        return ended, task_seconds


class ReviewQueue:
    """(task, check index) pairs whose review traces are to be read, handled by :meth:`run` in the task group."""

    def __init__(self, reviews: ReviewsFn, handle: Callable[[str, int, list[dict[str, Any]]], None],
                 capacity: int = 10_000) -> None:
        self.reviews = reviews
        self.handle = handle
        self.dropped = 0
        send, receive = anyio.create_memory_object_stream[tuple[str, int]](capacity)
        self._send: MemoryObjectSendStream[tuple[str, int]] = send
        self._receive: MemoryObjectReceiveStream[tuple[str, int]] = receive

    def put(self, task_id: str, check_idx: int) -> None:
        try:
            self._send.send_nowait((task_id, check_idx))
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):  # full, or stopping
            self.dropped += 1

    async def run(self) -> None:
        """Read the queued reviews until the daemon stops; both ends of the queue close with it."""
        async with self._send, self._receive:
            async for task_id, idx in self._receive:
                try:
                    traces = await self.reviews(task_id, idx)
                    self.handle(task_id, idx, traces)
                except Exception:  # a failed read costs a data point, never the daemon
                    log.exception("could not read the reviews of %s check %d", task_id, idx)
