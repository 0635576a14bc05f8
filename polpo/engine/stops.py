"""When the quality loop stops early: the plateau of a fix loop's scores, and a task over its budget.

Both keep the task's *best* attempt's score (``task.score``), not the last one's: a loop that got worse before it
was stopped still reports what it reached. The scores live in memory for the task's fix loop; a node that did not
see the task's previous attempt (it restarted, or another node of a cluster ran it) reads them back from the
stored assessments first (:meth:`QualityStops.recall`), so neither the plateau's count nor the best score starts
again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from polpo.assessment.pipeline import Verdict, combine_scores
from polpo.engine import policy
from polpo.engine.board import MissionBoard
from polpo.engine.lifecycle import Trigger
from polpo.engine.spend_book import DAILY, SpendBook, TurnMeter
from polpo.llm.spend import CURRENT_METER, BudgetRefused
from polpo.model.records import Assessment, Attempt, Mission, Task
from polpo.model.status import AttemptKind, AttemptStatus
from polpo.store.protocol import Store
from polpo.store.tx import Tx

__all__ = ["QualityStops", "refusal"]


def refused() -> BudgetRefused | None:
    """The refusal of this turn's first call that did not fit a budget, if one did not."""
    meter = CURRENT_METER.get()
    return meter.refused if isinstance(meter, TurnMeter) else None


def hold(m: Mission, scope: str | None) -> bool:
    """Whether a task its own budget stopped waits on hold (``onBudget: "hold"``) rather than failing."""
    return scope == "task" and m.spec.settings.on_budget == "hold"


def refusal() -> str | None:
    """The scope of the budget that refused a call of this turn (task, mission, agent, daemon), if one did."""
    r = refused()
    return r.scope if r is not None else None


CLOSE = 0.25
"""Scores this close are too close to rank without a side-by-side comparison (when no plateau sets a margin)."""


def pairwise(verdict: Verdict) -> str | None:
    """The side-by-side comparison of this attempt with the previous one (better, worse, tie), if a review made
    one (:mod:`polpo.review.pairwise`)."""
    for c in verdict.checks:
        pair = (c.review or {}).get("pairwise")
        if isinstance(pair, dict):
            return str(pair.get("result"))
    return None


class QualityStops:
    def __init__(self, store: Store, board: MissionBoard, spend: SpendBook) -> None:
        self.spend = spend
        self.store = store
        self.board = board
        self.scores: dict[str, list[tuple[int, float]]] = {}  # task id → (attempt, score) of its fix loop
        self.best: dict[str, tuple[float, int]] = {}  # task id → its best (score, attempt) so far
        self.seen: dict[str, int] = {}  # task id → the last attempt whose score was recorded here
        self.better: dict[str, set[int]] = {}  # task id → attempts judged better than the one before, side by side

    async def recall(self, task: Task, attempt: Attempt) -> None:
        """Before an attempt's scores count: when this node did not record the one before it, the fix loop's
        scores and the best so far are read back from the store."""
        if attempt.number <= 1 or self.seen.get(task.id) == attempt.number - 1:
            return
        earlier = [row for row in await self.store.task_scores(task.id) if row[0] < attempt.number]
        scored = [(sc, n) for n, _, sc in earlier if sc is not None]
        if scored:
            self.best[task.id] = max(scored, key=lambda b: (b[0], -b[1]))  # the first of equal bests
        loop: list[tuple[int, float]] = []
        for n, kind, sc in reversed(earlier if attempt.kind is AttemptKind.FIX else []):
            if sc is not None:
                loop.insert(0, (n, sc))
            if kind != AttemptKind.FIX:
                break  # the attempt that began the fix loop
        self.scores[task.id] = loop
        self.seen[task.id] = attempt.number - 1

    def end(self, task_id: str) -> tuple[float, int] | None:
        """The task is done or failed: its best (score, attempt), and nothing of it kept."""
        self.scores.pop(task_id, None)
        self.seen.pop(task_id, None)
        self.better.pop(task_id, None)
        return self.best.pop(task_id, None)

    def plateaued(self, m: Mission, task: Task, attempt: Attempt, verdict: Verdict) -> bool:
        """Record the attempt's score; whether the task's fix loop stopped improving (``plateau``)."""
        score = combine_scores(verdict.checks)[0]
        self.seen[task.id] = attempt.number
        if score is None:
            return False
        loop = self.scores.setdefault(task.id, [])
        if not loop or loop[-1][0] != attempt.number:
            loop.append((attempt.number, score))
        best = self.best.get(task.id)
        # better than the previous attempt counts as progress only when that one was the best so far
        better = pairwise(verdict) == "better" and best is not None and best[1] == attempt.number - 1
        if better:
            self.better.setdefault(task.id, set()).add(attempt.number)
        plateau = task.spec.plateau or m.spec.settings.plateau
        close = plateau.margin if plateau is not None else CLOSE
        if best is None or score > best[0] or (better and score >= best[0] - close):
            self.best[task.id] = (score, attempt.number)  # close scores: the one judged better side by side
        judged = self.better.get(task.id, set())
        return plateau is not None and policy.plateaued([sc for _, sc in loop], plateau.attempts, plateau.margin,
                                                        [n in judged for n, _ in loop])

    def over_budget(self, m: Mission, task: Task, attempt: Attempt, verdict: Verdict) -> bool:
        """A call of the assessment did not fit the task's or mission's budget: end the task (True), unless the
        verdict passed regardless. A daily budget's refusal is not the task's end (its work waits)."""
        r = refused()
        if r is None or r.scope in DAILY or (verdict.passed and verdict.error is None):
            return False
        self.plateaued(m, task, attempt, verdict)
        self.budget_end(task, attempt, str(r), hold=hold(m, r.scope))
        return True

    def interrupted(self, tx: Tx, task: Task, attempt: Attempt) -> None:
        """A daily budget refused the agent's call: the attempt is interrupted, the task waits (pending, parked by
        the dispatcher's source) without using a retry, and runs again when the day's budget allows."""
        attempt.status = AttemptStatus.INTERRUPTED
        self.board.transition(tx.attempt(attempt), task, Trigger.INTERRUPTED,
                              f"{attempt.error}; the attempt runs again when the budget allows")
        self.store.submit(tx)
        self.board.after_change(task)

    async def through_day(self, verdict: Verdict, again: Callable[[Assessment], Awaitable[Verdict]]) -> Verdict:
        """An assessment a daily budget refused a call of: it waits for the next day, then its missing checks run
        (the task keeps its slot meanwhile, as through a judge outage)."""
        meter = CURRENT_METER.get()
        while (isinstance(meter, TurnMeter) and meter.refused is not None and meter.refused.scope in DAILY
               and verdict.assessment is not None and not (verdict.passed and verdict.error is None)):
            await self.spend.next_day()
            meter.refused = None
            verdict = await again(verdict.assessment)
        return verdict

    def budget_end(self, task: Task, attempt: Attempt | None, why: str, *, hold: bool = False) -> None:
        """The task ends ``failed`` for its budget, with its best attempt's score (``task.score``); with ``hold``
        (``onBudget: "hold"``, its own budget) it waits ``on_hold`` for ``polpo retry TASK --budget USD``."""
        if hold:
            tx = self.store.tx()
            if attempt is not None:
                tx.attempt(attempt)
            self.board.transition(tx, task, Trigger.BUDGET_HOLD, f"budget: {why}; `polpo retry {task.id} --budget "
                                  "USD` (or --tokens N) raises it and goes on")
            self.store.submit(tx)
            return
        best = self.end(task.id)
        tx = self.store.tx()
        if attempt is not None:
            attempt.verdict = attempt.verdict or "failed"
            tx.attempt(attempt)
        if best is not None:
            task.score = best[0]
        suffix = f"; best score {best[0]:g} (attempt {best[1]})" if best is not None else ""
        self.board.transition(tx, task, Trigger.BUDGET, f"budget: {why}{suffix}")
        self.store.submit(tx)
        self.board.after_change(task)
