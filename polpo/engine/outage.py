"""Outages are nobody's verdict: a judge that cannot be reached, or an LLM agent whose own model cannot.

* **The judge.** An assessment with a check that could not be done (``Verdict.error``) spends no fix or retry
  and does not run the agent again: the same assessment is tried again after ``[judge] outage_backoff`` seconds
  (default 30, doubling each time) up to ``[judge] outage_retries`` times (default 5), each announced by
  ``assessment:deferred``. When they are spent — or at once when retrying cannot help (a refused key, no judge
  configured) — ``assessment:error {taskId, reason, retryable}`` is announced and the task waits ``on_hold``
  with the reason; ``polpo retry TASK`` re-runs only the assessment.
* **An LLM agent's model.** A provider failure (unreachable, 5xx, timeouts after the client's own retries, a
  refused key) interrupts the attempt instead of failing it: ``agent:interrupted``, then the task runs again after
  the same backoff, without using a retry; after ``outage_retries`` interruptions in a row it waits ``on_hold``
  and ``polpo retry TASK`` runs it again.

Neither applies to a failure the evidence blames on the request (:mod:`polpo.llm.failures`: the same error twice
for the same request, runaway generation, a context overflow): the attempt fails, or the check errs as not
retryable, at once.

While it backs off the task keeps its run (and so its concurrency slot); a shutdown or a cancel stops the wait
like any run. The count of an agent's interruptions lives in memory: a restart starts it again.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

import anyio

from polpo.assessment.pipeline import Verdict
from polpo.config import Config
from polpo.engine.board import MissionBoard
from polpo.engine.lifecycle import Trigger
from polpo.events.catalog import AgentInterrupted, AssessmentDeferred, AssessmentError
from polpo.jitter import full_jitter
from polpo.model.records import Assessment, Attempt, Mission, Task
from polpo.store.protocol import Store

__all__ = ["NOT_BY_ITSELF", "OutageKeeper"]

NOT_BY_ITSELF = "not tried again by itself: it needs a change first"  # a refused key, no judge configured

Sleep = Callable[[float], Awaitable[None]]
Again = Callable[[Assessment], Awaitable[Verdict]]


class OutageKeeper:
    def __init__(self, cfg: Config, store: Store, board: MissionBoard, sleep: Sleep = anyio.sleep,
                 rng: Callable[[], float] = random.random) -> None:
        self.store = store
        self.board = board
        self.retries = cfg.judge.outage_retries
        self.backoff = cfg.judge.outage_backoff.total_seconds()
        self.sleep = sleep
        self.rng = rng
        self.agent_outages: dict[str, int] = {}  # task id → provider interruptions in a row

    def delay(self, n: int) -> float:
        """Seconds before try ``n`` (1-based): full jitter over the backoff doubled ``n - 1`` times, so the tasks
        one outage stopped do not all call the provider again at the same instant (never 0: no busy retry)."""
        return self.backoff * 2.0 ** (n - 1) * (1.0 - full_jitter(1.0, self.rng))

    async def through(self, m: Mission, task: Task, verdict: Verdict, again: Again) -> Verdict | None:
        """The verdict once the judge answered, or None when the task was put on hold."""
        n = 0
        while verdict.error is not None:
            ids = {"mission_id": m.id, "task_id": task.id}
            if not verdict.retryable or n >= self.retries or verdict.assessment is None:
                tx = self.store.tx().event(AssessmentError(task_id=task.id, reason=verdict.error,
                                                           retryable=verdict.retryable), **ids)
                how = f"after {n} retries" if verdict.retryable else NOT_BY_ITSELF
                then = "" if verdict.retryable else "once that is fixed, "
                self.board.transition(tx, task, Trigger.OUTAGE,
                                      f"the assessment could not be done ({how}): {verdict.error[:300]}; "
                                      f"{then}`polpo retry {task.id}` runs it again")
                self.store.submit(tx)
                return None
            n += 1
            wait = self.delay(n)
            self.store.submit(self.store.tx().event(AssessmentDeferred(
                task_id=task.id, reason=verdict.error[:500], retry=n, max_retries=self.retries, delay=wait), **ids))
            await self.sleep(wait)
            verdict = await again(verdict.assessment)
        return verdict

    def clear(self, task_id: str) -> None:
        """The agent's model answered: its interruptions in a row start again from zero."""
        self.agent_outages.pop(task_id, None)

    async def agent_interrupted(self, m: Mission, task: Task, attempt: Attempt, reason: str,
                                retryable: bool) -> None:
        """The attempt was interrupted by its model provider: run it again after a backoff, or hold the task."""
        ids = {"mission_id": m.id, "task_id": task.id}
        n = self.agent_outages.get(task.id, 0) + 1
        if not retryable or n > self.retries:
            self.clear(task.id)
            tx = self.store.tx().event(AgentInterrupted(attempt=attempt.number, reason=reason, retryable=retryable,
                                                        retry=n - 1, max_retries=self.retries, waiting=True), **ids)
            self.board.transition(tx, task, Trigger.OUTAGE, f"the model provider failed: {reason[:300]}; "
                                  f"`polpo retry {task.id}` runs it again")
            self.store.submit(tx)
            return
        self.agent_outages[task.id] = n
        wait = self.delay(n)
        self.store.submit(self.store.tx().event(AgentInterrupted(
            attempt=attempt.number, reason=reason, retryable=True, retry=n, max_retries=self.retries, delay=wait),
            **ids))
        await self.sleep(wait)
        tx = self.store.tx()
        self.board.transition(tx, task, Trigger.INTERRUPTED, "the model provider failed; the attempt runs again")
        self.store.submit(tx)
        self.board.after_change(task)
