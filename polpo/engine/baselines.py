"""A ``metric``'s baseline: its value in the task's workspace before the task's first attempt, measured once.

The runner asks for it right after an attempt's row is written (the task ``assigned``, the attempt ``starting``)
and before the agent starts. Each ``baseline: "before"`` metric of the task without a stored value is measured
then, and its value committed (a ``baselines`` row, announced by ``assessment:check:baseline``) before the
agent's process exists. So a task without a stored baseline has never run an agent: a daemon killed while it
measured measures again at the next attempt (the workspace is still the "before"), and once the value is stored
it is never measured again — every fix and retry, on whichever node, is compared with it. The command carries
the attempt's marker, so one left running by a crashed daemon is killed at restart with the attempt's processes.

A baseline that cannot be measured (the command fails, times out or prints no number) fails the task before its
agent starts (``assigned → failed`` on ``no_baseline``): the comparison the mission asks for cannot be made, and
no attempt could change that, so none is spent. The reason says what to do: fix the command (make it print 0
when there is nothing to measure yet), then ``polpo retry TASK`` measures again — the agent never ran, so the
workspace is still the "before".
"""

from __future__ import annotations

from pathlib import Path

import orjson

from polpo.checks.expectations import MetricExpectation
from polpo.checks.metric import label, measure, subject
from polpo.clock import Clock
from polpo.config import Config
from polpo.engine.board import MissionBoard
from polpo.engine.lifecycle import Trigger
from polpo.events.catalog import CheckBaseline
from polpo.model.records import Attempt, Mission, Task
from polpo.model.status import AttemptStatus
from polpo.store.protocol import Store
from polpo.store.tx import Tx
from polpo.tools.marks import attempt_env

__all__ = ["Baselines"]


class Baselines:
    def __init__(self, cfg: Config, store: Store, clock: Clock, board: MissionBoard) -> None:
        self.cfg = cfg
        self.store = store
        self.clock = clock
        self.board = board

    async def before_agent(self, m: Mission, task: Task, attempt: Attempt, ws: Path) -> bool:
        """Measure and store the task's baselines not stored yet; False when one could not be measured (the task
        has then failed, and its agent must not start)."""
        wanted = [(i, e) for i, e in enumerate(task.spec.all_expectations)
                  if isinstance(e, MetricExpectation) and e.baseline is not None]
        if not wanted:
            return True
        stored = await self.store.task_baselines(task.id)
        ids = {"mission_id": m.id, "task_id": task.id}
        for idx, exp in wanted:
            if idx in stored:
                continue
            timeout = exp.timeout.total_seconds() if exp.timeout is not None else \
                self.cfg.defaults.check_timeout.total_seconds()
            got = await measure(exp, workspace=ws, clock=self.clock, timeout=timeout, phase="before",
                                extra_env=attempt_env(self.cfg.state_dir, attempt.id))
            event = CheckBaseline(index=idx, label=label(exp), attempt=attempt.number, value=got.value,
                                  problem=got.problem, line=got.line or None, duration=got.duration)
            if got.value is None:
                self._failed(self.store.tx().event(event, **ids), task, attempt,
                             f"the baseline of metric #{idx + 1} ({subject(exp)}) could not be measured before the "
                             f"agent started: {got.problem}", got.details)
                return False
            data = {"label": label(exp), "command": exp.command, "line": got.line, "attempt": attempt.number,
                    "duration": got.duration}
            tx = self.store.tx().baseline(task.id, idx, got.value, orjson.dumps(data).decode(), self.clock.now())
            await self.store.commit(tx.event(event, **ids))  # durable before the agent's process exists
        return True

    def _failed(self, tx: Tx, task: Task, attempt: Attempt, why: str, details: str | None) -> None:
        """The attempt ends unstarted and the task fails, saying how to go on."""
        attempt.status = AttemptStatus.FINISHED
        attempt.error = why
        attempt.permanent = True
        attempt.verdict = "failed"
        attempt.stderr_tail = details or ""
        attempt.finished_at = self.clock.now()
        attempt.duration = 0.0
        tx.attempt(attempt)
        self.board.transition(tx, task, Trigger.NO_BASELINE,
                              f"{why}. Fix the command (make it print 0 when there is nothing to measure yet); "
                              f"`polpo retry {task.id}` measures it again (the agent never ran)")
        self.store.submit(tx)
        self.board.after_change(task)
