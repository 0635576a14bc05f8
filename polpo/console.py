"""Progress lines for the terminal that started the daemon, written so they can never stall it.

A terminal that is paused (Ctrl-S, a pipe nobody reads, ``polpo daemon | less``) blocks ``write``. The
daemon's event loop must not wait for it, so lines go through a bounded queue to a writer thread (a burst at
a time); when the queue is full, lines are dropped and counted, and the count is reported once the terminal
drains. The complete record is always ``events.jsonl``.

:class:`ConsoleView` decides what the terminal shows: mission and task milestones, a line when an attempt starts,
a heartbeat for an attempt that runs long (so a 5-minute agent run is not 5 minutes of silence), the failed
check on fix/retry lines and the score on a task's done line; in colour on a terminal, unless ``NO_COLOR`` is set.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from polpo.events import catalog as E
from polpo.events.render import paint, render, safe, use_color

__all__ = ["ConsolePrinter", "ConsoleView", "use_color"]

#: events the daemon's terminal shows (task transitions only to done and failed)
SHOWN = frozenset(p.NAME for p in (
    E.MissionAccepted, E.MissionRejected, E.MissionCompleted, E.MissionCancelled, E.MissionResumed, E.TaskFix,
    E.TaskRetry, E.TaskMaxRetries, E.TaskRecovered, E.TaskError, E.GatePassed, E.GateFailed,
    E.OrchestratorStarted, E.OrchestratorShutdown, E.ThresholdFailed, E.SlaWarning, E.SlaViolated,
    E.EscalationTriggered, E.AssessmentCorrected, E.TaskRetryBlocked, E.NotificationFailed, E.AgentSpawned,
    E.AssessmentDeferred, E.AssessmentError, E.AgentInterrupted, E.TaskMergeConflict, E.QuestionAsked,
    E.ApprovalRequested))
#: events it only learns from (scores for done lines, running attempts for the heartbeat)
FOLLOWED = frozenset(p.NAME for p in (E.AssessmentComplete, E.AgentFinished, E.TaskTransition))
WANTED = SHOWN | FOLLOWED


class ConsoleView:
    """Event (JSON form) in, lines out; remembers each task's last score and its running attempt."""

    def __init__(self, *, color: bool = False, heartbeat: float = 60.0) -> None:
        self.color = color
        self.heartbeat_every = heartbeat
        self.scores: dict[str, float] = {}
        self.running: dict[str, tuple[float, float, Mapping[str, Any]]] = {}  # task -> (started, last line, spawn data)

    def lines(self, ev: Mapping[str, Any], now: float) -> list[str]:
        """What to print for ``ev`` (``now``: a monotonic clock reading, for the heartbeat)."""
        name = ev.get("event")
        d: Mapping[str, Any] = ev.get("data") or {}
        task = ev.get("taskId")
        if name == "assessment:complete" and task and isinstance(d.get("globalScore"), int | float):
            self.scores[task] = d["globalScore"]
        elif name == "agent:spawned" and task:
            self.running[task] = (now, now, d)
        elif name == "agent:finished" and task:
            self.running.pop(task, None)
        if name == "task:transition":
            if d.get("to") not in ("done", "failed"):
                if d.get("to") == "cancelled":  # what it remembered of the task goes (else kept for good)
                    self.scores.pop(task or "", None)
                    self.running.pop(task or "", None)
                return []
            self.running.pop(task or "", None)
            line = render(ev, color=self.color)
            score = self.scores.pop(task or "", None)
            if score is not None and d.get("to") == "done":
                line += f"; score {score:.2f}"
            return [line]
        return [render(ev, color=self.color)] if name in SHOWN else []

    def heartbeat(self, now: float) -> list[str]:
        """A line for each attempt that has run ``heartbeat`` seconds since its last line."""
        out = []
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds")[11:23]
        for task, (started, last, d) in self.running.items():
            if now - last < self.heartbeat_every:
                continue
            self.running[task] = (started, now, d)
            text = (f"attempt {d.get('attempt')} ({safe(d.get('kind'))}) by {safe(d.get('agentName'))} "
                    f"still running after {_elapsed(now - started)}")
            out.append(self.note("task:running", text, task, stamp))
        return out

    def note(self, name: str, text: str, who: str = "", stamp: str | None = None) -> str:
        """A line of the daemon's own (a heartbeat, a stop) in the events' format: time, name, whose, text."""
        stamp = stamp or datetime.now(UTC).isoformat(timespec="milliseconds")[11:23]
        name, who = f"{name:<26}", f"{safe(who):<20}"
        if self.color:
            return f"{paint(stamp, 'dim')}  {paint(name, 'info')} {paint(who, 'bold')} {text}"
        return f"{stamp}  {name} {who} {text}"


def _elapsed(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m {s}s"
    h, m = divmod(m, 60)
    return f"{h}h {m}m"


class ConsolePrinter:
    """Writes lines in a thread of its own, a burst at a time.

    ``print`` appends to a deque and wakes the writer only when it sleeps; the writer then lingers
    :attr:`LINGER` seconds so that a burst of lines costs one wake-up and one write. Waking a thread per line cost
    the event loop ~5 % of its time at a few hundred tasks a second (every wake-up contends for the GIL).
    """

    LINGER = 0.05

    def __init__(self, stream: TextIO, *, capacity: int = 1000) -> None:
        self.stream = stream
        self.capacity = capacity
        self.dropped = 0
        self._lines: deque[str] = deque()
        self._ready = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="polpo-console", daemon=True)
        self._thread.start()

    def print(self, line: str) -> None:
        """Queue ``line``; never blocks. Dropped (and counted) when the terminal is not keeping up."""
        if len(self._lines) >= self.capacity:
            self.dropped += 1
            return
        self._lines.append(line)
        if not self._ready.is_set():
            self._ready.set()

    def close(self, timeout: float = 2.0) -> None:
        """Flush what is queued (up to ``timeout`` seconds) and stop the writer thread."""
        self._stopping = True
        self._ready.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        reported = 0
        while True:
            self._ready.wait()
            if not self._stopping:
                time.sleep(self.LINGER)
            self._ready.clear()  # before taking the lines: one printed after this sets it again
            batch = [self._lines.popleft() for _ in range(len(self._lines))]
            try:
                if self.dropped > reported:
                    self.stream.write(f"[console: {self.dropped - reported} lines dropped while the terminal "
                                      f"was not reading; events.jsonl has them all]\n")
                    reported = self.dropped
                if batch:
                    self.stream.write("".join(f"{line}\n" for line in batch))
                    self.stream.flush()
            except (OSError, ValueError):  # closed terminal or pipe: keep draining so print() never blocks
                pass
            if self._stopping and not self._lines:
                return
