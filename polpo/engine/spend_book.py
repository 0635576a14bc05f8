"""Budgets in USD and tokens: every LLM call's spend counted in four accounts, each checked before the call.

Accounts (one :class:`~polpo.llm.spend.Spend` each, a ``spend`` row each, keyed ``(scope, key, period)``):

* ``task`` — the task's every call: agent turns, reviewers, samples, dimension generation, the expectation judge,
  fixes, retries, escalation. Budget: the task's ``budget``, else its mission's ``settings.taskBudget``.
* ``mission`` — the sum of its tasks'. Budget: ``settings.budget``.
* ``agent`` — an agent's calls of one UTC day (period ``YYYY-MM-DD``). Budget: ``[agents.X] daily_usd`` /
  ``daily_tokens``.
* ``daemon`` — every call of one UTC day. Budget: ``[budget] daily_usd`` / ``daily_tokens``.

A turn's :class:`TurnMeter` is what :mod:`polpo.llm.client` asks (through :data:`~polpo.llm.spend.CURRENT_METER`):
before a call it must fit every account's budget with what is already spent, what calls in flight reserved, and
its own estimate (prompt tokens + the model's most output, priced by :func:`~polpo.llm.prices.price`); otherwise it
is refused (``budget:exceeded``, once per account and crossing) and, for a task or mission budget, every later
call of the turn is refused too, so a tool loop stops at its next turn boundary. A call that a budget applies to
holds its estimate in the stored rows before it is sent (:mod:`polpo.engine.spend_accounts`: one commit), so a
crash never makes a budget forget it. After the call its real usage is counted and the rows are written (the
state, then ``budget:warning`` at ``[budget] warn_at``): the hold's settlement, or the call's spend when no budget
applied. What the runner and the dispatcher do with a refusal is theirs: a task or mission budget ends the task
(``failed``, reason budget), a daily one pauses new work until the day ends (:meth:`SpendBook.keeper` wakes the
dispatcher then).

Several daemons on one PostgreSQL store count into the same rows: each call's spend is added to what a row holds
(:mod:`polpo.store.spend_writes`), never written over it, so a mission whose tasks ran on three nodes, or a task
retried on another node, is charged every call. Before a turn that a budget applies to, the book reads its accounts
back from the store (:meth:`SpendBook.open_meter`): a budget counts every node's calls up to that moment, and the
daily ones are the cluster's, not a node's. What other nodes spend during a turn is seen at the next turn's start,
so a budget can be passed by at most the calls in flight on the other nodes at once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import anyio

from polpo.clock import Clock, iso
from polpo.config import Config
from polpo.engine import spend_accounts as holds
from polpo.engine.spend_accounts import Account, Hold, projected
from polpo.engine.spend_rules import (
    NO_LIMIT,
    Limit,
    describe,
    fraction,
    limit_of,
    measure_of,
    over,
    spent_over,
    task_limit,
)
from polpo.events.catalog import BudgetExceeded, BudgetWarning
from polpo.llm.prices import price
from polpo.llm.spend import BudgetRefused, Estimate, Spend
from polpo.mission.schema import MissionSpec, TaskSpec
from polpo.store import spend_writes
from polpo.store.protocol import Store
from polpo.store.spend_writes import RAISE
from polpo.store.tx import Tx

__all__ = ["DAILY", "Account", "SpendBook", "TurnMeter"]

log = logging.getLogger("polpo.budget")

DAILY = frozenset({"agent", "daemon"})
WARNED, EXCEEDED = 1, 2


Sleep = Callable[[float], Awaitable[None]]


class SpendBook:
    """Every account this daemon counts, in memory (loaded from the store at start), and its budgets."""

    def __init__(self, cfg: Config, store: Store, clock: Clock) -> None:
        self.cfg = cfg
        self.store = store
        self.clock = clock
        self.accounts: dict[tuple[str, str, str], Account] = {}
        self.daemon_limit = Limit(cfg.budget.daily_usd, cfg.budget.daily_tokens)
        self.agent_limits = {n: Limit(a.daily_usd, a.daily_tokens) for n, a in cfg.agents.items()
                             if a.daily_usd is not None or a.daily_tokens is not None}
        self.daily_limits = self.daemon_limit.any or bool(self.agent_limits)
        self.warn_at = cfg.budget.warn_at
        self.sleep: Sleep = anyio.sleep
        self.on_resume: Callable[[], None] = lambda: None
        self._paused = anyio.Event()
        self._new_day = anyio.Event()

    async def load(self) -> None:
        """The accounts of open missions and of today, as the last daemon left them."""
        for r in await self.store.spend_rows(self.today()):
            self._read(r)

    def _read(self, r: dict[str, Any]) -> None:
        """A stored row into its account: what every node counted, or what this one did when more (its own
        last calls may still be on their way to the store)."""
        a = self.account(r["scope"], r["key"], r["period"], r["mission_id"])
        a.prune()
        s, t = a.spend, projected(Spend(int(r["tokens_in"]), int(r["tokens_out"]), float(r["usd"]),
                                        bool(r["usd_known"]), int(r["calls"])), a.holds)
        a.spend = Spend(max(s.tokens_in, t.tokens_in), max(s.tokens_out, t.tokens_out), max(s.usd, t.usd),
                        s.usd_known and t.usd_known, max(s.calls, t.calls))
        stored = int(r["flags"])
        if stored // RAISE > a.flags // RAISE:  # a raise this node has not seen: its budget, crossings anew
            a.flags = stored
            a.raised = Limit(r["limit_usd"], r["limit_tokens"])
        elif stored // RAISE == a.flags // RAISE:
            a.flags |= stored
        # else a raise made here is not stored yet: this node's account stands
        if a.scope in DAILY and (a.flags & EXCEEDED or spent_over(a.spend, self._daily_limit(a)) is not None):
            self._paused.set()  # this node's keeper wakes its work at the day's end, whoever spent the day

    def _daily_limit(self, a: Account) -> Limit:
        return self.daemon_limit if a.scope == "daemon" else self.agent_limits.get(a.key, NO_LIMIT)

    def today(self) -> str:
        return self.clock.now().date().isoformat()

    def account(self, scope: str, key: str, period: str = "", mission_id: str | None = None) -> Account:
        k = (scope, key, period)
        a = self.accounts.get(k)
        if a is None:
            a = self.accounts[k] = Account(scope, key, period, mission_id)
        return a

    def spend_of(self, scope: str, key: str, period: str = "") -> Spend:
        a = self.accounts.get((scope, key, period))
        return a.spend if a is not None else Spend()

    def forget_mission(self, mission_id: str, task_ids: list[str]) -> None:
        """A finished mission's accounts leave memory (their rows stay)."""
        self.accounts.pop(("mission", mission_id, ""), None)
        for t in task_ids:
            self.accounts.pop(("task", t, ""), None)

    # -- a turn ---------------------------------------------------------------------------------------------
    async def open_meter(self, task_id: str, mission_id: str, agent: str, task: TaskSpec,
                         mission: MissionSpec) -> TurnMeter:
        """A turn's meter, its accounts first read back from the store when a budget applies to them: other
        nodes' calls count (a turn without a budget reads nothing)."""
        fixed = task_limit(task, mission).any or mission.settings.budget is not None
        if fixed or self.daily_limits:
            for r in await self.store.spend_now(mission_id if fixed else None, self.today() if self.daily_limits
                                                else None):
                self._read(r)
        return self.meter(task_id, mission_id, agent, task, mission)

    def meter(self, task_id: str, mission_id: str, agent: str, task: TaskSpec, mission: MissionSpec) -> TurnMeter:
        raised = self.accounts.get(("task", task_id, ""))
        own = raised.raised if raised is not None and raised.raised is not None else task_limit(task, mission)
        return TurnMeter(self, (own, limit_of(mission.settings.budget)), agent, mission_id, task_id)

    def raise_task(self, task_id: str, mission_id: str, limit: Limit) -> None:
        """``polpo retry TASK --budget``: the task's budget from now on (the crossing flags start again)."""
        a = self.account("task", task_id, "", mission_id)
        a.raised = limit
        a.flags = (a.flags // RAISE + 1) * RAISE  # the crossings start again, under the next raise
        self.store.submit(spend_writes.raise_limit(self.store.tx(), self._row(a, None)))

    def daily(self, agent: str) -> list[tuple[Account, Limit]]:
        """Today's accounts of ``agent`` and of the daemon (a new day, new accounts)."""
        day = self.today()
        return [(self.account("agent", agent, day), self.agent_limits.get(agent, NO_LIMIT)),
                (self.account("daemon", "", day), self.daemon_limit)]

    def spent_fixed(self, meter: TurnMeter) -> str | None:
        """Why the task may not start: its task's or mission's budget already spent (None: it may)."""
        for key, lim in ((("task", meter.task_id, ""), meter.limits[0]),
                         (("mission", meter.mission_id, ""), meter.limits[1])):
            a = self.accounts.get(key) if lim.any else None  # no account made here: most turns spend nothing
            if a is not None and (a.flags & EXCEEDED or spent_over(a.spend, lim) is not None):
                return f"{a.label} is spent ({describe(a.spend, lim)})"
        return None

    def paused_key(self, agent: str) -> str | None:
        """The limit key holding ``agent``'s new work until the day ends (None: it may start)."""
        if not self.daily_limits:
            return None  # asked for every task the dispatcher pops: nothing to look up without a daily budget
        day = self.today()
        for scope, key, lim in (("agent", agent, self.agent_limits.get(agent, NO_LIMIT)),
                                ("daemon", "", self.daemon_limit)):
            a = self.accounts.get((scope, key, day)) if lim.any else None
            if a is not None and (a.flags & EXCEEDED or spent_over(a.spend, lim) is not None):
                return f"budget:{scope}:{key}"
        return None

    # -- events and rows --------------------------------------------------------------------------------------
    def exceeded(self, a: Account, lim: Limit, measure: str, needed: float | None = None) -> None:
        if a.flags & EXCEEDED:
            return
        a.flags |= EXCEEDED
        spent, limit = measure_of(a.spend, lim, measure)
        tx = spend_writes.add(self.store.tx(), self._row(a, None))
        reserved = round(a.reserved_usd, 6) if measure == "usd" else float(a.reserved_tokens)
        tx.event(BudgetExceeded(scope=a.scope, key=a.key, measure=measure, spent=spent, limit=limit,
                                needed=needed, in_flight=reserved if needed is not None else None,
                                period=a.period or None), **_ids(a))
        self.store.submit(tx)
        if a.scope in DAILY:
            log.warning("%s is spent: new work waits for the next UTC day", a.label)
            self._paused.set()

    async def hold(self, accounts: list[tuple[Account, Limit]], est: Spend) -> Hold:
        """A call's estimate added to each account's row and made durable before the call is sent."""
        h = Hold(est)
        tx = self.store.tx()
        for a, _ in accounts:
            spend_writes.add(tx, self._row(a, est))
            a.holds.append(h)
        try:
            await self.store.commit(tx)
        except BaseException:
            for a, _ in accounts:
                a.holds.remove(h)
            raise
        return h

    def write(self, accounts: list[tuple[Account, Limit]], call: Spend) -> Tx:
        """``call`` (one call's spend, or a hold's settlement) added to each account's row, and the crossings the
        accounts' spend made; the transaction, submitted."""
        tx = self.store.tx()
        for a, lim in accounts:
            spend_writes.add(tx, self._row(a, call))
            if not lim.any:
                continue
            frac, measure = fraction(a.spend, lim)
            if frac >= self.warn_at and not a.flags & WARNED:
                a.flags |= WARNED
                spent, limit = measure_of(a.spend, lim, measure)
                tx.event(BudgetWarning(scope=a.scope, key=a.key, measure=measure, spent=spent, limit=limit,
                                       period=a.period or None), **_ids(a))
            crossed = spent_over(a.spend, lim)
            if crossed is not None and not a.flags & EXCEEDED:  # passed without a refusal (an estimate too low)
                a.flags |= EXCEEDED
                spent, limit = measure_of(a.spend, lim, crossed)
                tx.event(BudgetExceeded(scope=a.scope, key=a.key, measure=crossed, spent=spent, limit=limit,
                                        period=a.period or None), **_ids(a))
                if a.scope in DAILY:
                    self._paused.set()
        return self.store.submit(tx)

    def _row(self, a: Account, call: Spend | None) -> tuple[object, ...]:
        """``a``'s row of :mod:`polpo.store.spend_writes`: one call's spend to add (none: only its flags)."""
        s = call or Spend()
        r = a.raised
        return (a.scope, a.key, a.period, a.mission_id, s.tokens_in, s.tokens_out, round(s.usd, 9),
                int(s.usd_known), s.calls, a.flags, r.usd if r else None, r.tokens if r else None,
                iso(self.clock.now()))

    # -- the daily pause --------------------------------------------------------------------------------------
    def seconds_to_reset(self) -> float:
        now = self.clock.now()
        tomorrow = datetime(now.year, now.month, now.day, tzinfo=now.tzinfo) + timedelta(days=1)
        return max(0.0, (tomorrow - now).total_seconds())

    async def keeper(self) -> None:
        """While a daily budget holds work back: wait for the day's end, then let the work start (``on_resume``)."""
        while True:
            await self._paused.wait()
            self._paused = anyio.Event()
            await self.sleep(self.seconds_to_reset())
            log.info("a new UTC day: daily budgets start again")
            day, self._new_day = self._new_day, anyio.Event()
            day.set()
            self.on_resume()

    async def next_day(self) -> None:
        """Wait for the keeper's next reset (work in flight that a daily budget refused)."""
        await self._new_day.wait()


@dataclass(frozen=True, slots=True)
class _Ticket:
    """A call in flight: its hold, in each of its accounts (the day's as of the call)."""

    accounts: list[tuple[Account, Limit]]
    hold: Hold


class TurnMeter:
    """One task turn's accounts: what :class:`~polpo.llm.client.LLMClient` asks before and after each call."""

    def __init__(self, book: SpendBook, limits: tuple[Limit, Limit], agent: str, mission_id: str,
                 task_id: str) -> None:
        self.book: SpendBook | None = book
        self.limits = limits  # the task's, the mission's
        self._fixed: list[tuple[Account, Limit]] | None = None
        self.agent = agent
        self.mission_id = mission_id
        self.task_id = task_id
        self.refused: BudgetRefused | None = None  # the first refusal of the turn

    @property
    def fixed(self) -> list[tuple[Account, Limit]]:
        """The task's and the mission's accounts, made on the turn's first call (a command agent's turn makes
        none)."""
        if self._fixed is None:
            b = self._book()
            self._fixed = [(b.account("task", self.task_id, "", self.mission_id), self.limits[0]),
                           (b.account("mission", self.mission_id, "", self.mission_id), self.limits[1])]
        return self._fixed

    def _book(self) -> SpendBook:
        if self.book is None:
            raise RuntimeError("the turn is over")
        return self.book

    def close(self) -> None:
        """The turn is over: nothing more is metered through this meter, and it holds nothing of the engine."""
        self.book = None
        self._fixed = None

    async def admit(self, model: str, estimate: Estimate) -> object:
        book = self.book
        if book is None:
            return None  # a call made after its turn (from a task a library started in it): not the turn's
        if self.refused is not None and self.refused.scope not in DAILY:
            raise BudgetRefused(str(self.refused), scope=self.refused.scope)  # the turn's loop stops here
        limited = [(a, lim) for a, lim in (*self.fixed, *book.daily(self.agent)) if lim.any]
        if not limited:
            return None
        tokens_in, most_out = estimate()
        tokens = tokens_in + most_out
        usd = price(model, tokens_in, most_out)
        for a, lim in limited:
            measure = over(a.spend, a.reserved_usd, a.reserved_tokens, lim, usd, tokens)
            if measure is not None:
                needed = round(usd, 6) if measure == "usd" and usd is not None else float(tokens)
                book.exceeded(a, lim, measure, needed)
                need = f"${needed:.4f}" if measure == "usd" else f"{tokens} tokens"
                self.refused = BudgetRefused(
                    f"{a.label} cannot fit the next call ({describe(a.spend, lim)}; the call could need {need})"
                    + _next_step(a), scope=a.scope)
                raise self.refused
        accounts = [*self.fixed, *book.daily(self.agent)]
        return _Ticket(accounts, await book.hold(accounts, holds.estimate(tokens_in, most_out, usd)))

    def record(self, ticket: object, model: str, tokens_in: int, tokens_out: int, usd: float | None) -> None:
        book = self.book
        if book is None:
            return
        call = Spend()
        if tokens_in or tokens_out:  # (a failed call: nothing the provider reported using)
            call.add(tokens_in, tokens_out, usd)
        if isinstance(ticket, _Ticket):  # its estimate is in the rows: settled by the difference
            accounts, h = ticket.accounts, ticket.hold
            h.actual = call
            delta = holds.settlement(h.est, call)
        elif call.calls:
            accounts, delta = [*self.fixed, *book.daily(self.agent)], call
        else:
            return
        for a, _ in accounts:
            if call.calls:
                a.spend.add(tokens_in, tokens_out, usd)
            a.prune()
        tx = book.write(accounts, delta)
        if isinstance(ticket, _Ticket):
            ticket.hold.settled = tx


def _next_step(a: Account) -> str:
    if a.scope in DAILY:
        return "; new work waits for the next UTC day"
    if a.scope == "task":
        return f"; `polpo retry {a.key} --budget USD` (or --tokens N) raises it"
    return "; the mission starts no more tasks (a larger settings.budget needs a new run of its file)"


def _ids(a: Account) -> dict[str, str | None]:
    if a.scope == "task":
        return {"mission_id": a.mission_id, "task_id": a.key}
    if a.scope == "mission":
        return {"mission_id": a.key}
    return {}
