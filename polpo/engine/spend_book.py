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
call of the turn is refused too, so a tool loop stops at its next turn boundary. After the call its real usage is
counted and the rows are written (the state, then ``budget:warning`` at ``[budget] warn_at``). What the runner and
the dispatcher do with a refusal is theirs: a task or mission budget ends the task (``failed``, reason budget), a
daily one pauses new work until the day ends (:meth:`SpendBook.keeper` wakes the dispatcher then).

Several daemons on one PostgreSQL store each keep the daily accounts of their own calls (last write wins on the
shared row): a daily budget is per node there.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import anyio

from polpo.clock import Clock, iso
from polpo.config import Config
from polpo.events.catalog import BudgetExceeded, BudgetWarning
from polpo.llm.prices import price
from polpo.llm.spend import BudgetRefused, Estimate, Spend
from polpo.mission.schema import Budget, MissionSpec, TaskSpec
from polpo.store.protocol import Store

__all__ = ["DAILY", "Account", "Limit", "SpendBook", "TurnMeter", "limit_of", "over", "task_limit"]

log = logging.getLogger("polpo.budget")

DAILY = frozenset({"agent", "daemon"})
WARNED, EXCEEDED = 1, 2


@dataclass(frozen=True, slots=True)
class Limit:
    usd: float | None = None
    tokens: int | None = None

    @property
    def any(self) -> bool:
        return self.usd is not None or self.tokens is not None


NO_LIMIT = Limit()


def limit_of(b: Budget | None) -> Limit:
    return NO_LIMIT if b is None else Limit(b.usd, b.tokens)


def task_limit(task: TaskSpec, mission: MissionSpec) -> Limit:
    """The task's own ``budget``, else its mission's ``taskBudget``."""
    return limit_of(task.budget if task.budget is not None else mission.settings.task_budget)


@dataclass(slots=True)
class Account:
    scope: str
    key: str
    period: str
    mission_id: str | None
    spend: Spend = field(default_factory=Spend)
    flags: int = 0
    raised: Limit | None = None  # a task's budget as `polpo retry --budget` raised it
    reserved_usd: float = 0.0
    reserved_tokens: int = 0

    @property
    def label(self) -> str:
        who = {"task": f"task {self.key}", "mission": f"mission {self.key}", "agent": f"agent {self.key}'s daily",
               "daemon": "the daemon's daily"}[self.scope]
        return who + " budget"


def over(spend: Spend, reserved_usd: float, reserved_tokens: int, limit: Limit, usd: float | None,
         tokens: int) -> str | None:
    """The measure (``usd`` | ``tokens``) a call of this estimate would exceed, or None when it fits. Pure. A
    call with no known price is checked on tokens alone."""
    if limit.usd is not None and usd is not None and spend.usd + reserved_usd + usd > limit.usd:
        return "usd"
    if limit.tokens is not None and spend.tokens + reserved_tokens + tokens > limit.tokens:
        return "tokens"
    return None


def spent_over(spend: Spend, limit: Limit) -> str | None:
    """The measure already at or past its budget, or None. Pure."""
    if limit.usd is not None and spend.usd >= limit.usd:
        return "usd"
    if limit.tokens is not None and spend.tokens >= limit.tokens:
        return "tokens"
    return None


def _fraction(spend: Spend, limit: Limit) -> tuple[float, str]:
    fracs = []
    if limit.usd is not None:
        fracs.append((spend.usd / limit.usd, "usd"))
    if limit.tokens is not None:
        fracs.append((spend.tokens / limit.tokens, "tokens"))
    return max(fracs) if fracs else (0.0, "usd")


def _measure(spend: Spend, limit: Limit, measure: str) -> tuple[float, float]:
    if measure == "usd":
        return round(spend.usd, 6), float(limit.usd or 0)
    return float(spend.tokens), float(limit.tokens or 0)


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
            a = self.account(r["scope"], r["key"], r["period"], r["mission_id"])
            a.spend = Spend(int(r["tokens_in"]), int(r["tokens_out"]), float(r["usd"]), bool(r["usd_known"]),
                            int(r["calls"]))
            a.flags = int(r["flags"])
            if r["limit_usd"] is not None or r["limit_tokens"] is not None:
                a.raised = Limit(r["limit_usd"], r["limit_tokens"])
            if a.scope in DAILY and a.flags & EXCEEDED:
                self._paused.set()

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
    def meter(self, task_id: str, mission_id: str, agent: str, task: TaskSpec, mission: MissionSpec) -> TurnMeter:
        raised = self.accounts.get(("task", task_id, ""))
        own = raised.raised if raised is not None and raised.raised is not None else task_limit(task, mission)
        return TurnMeter(self, (own, limit_of(mission.settings.budget)), agent, mission_id, task_id)

    def raise_task(self, task_id: str, mission_id: str, limit: Limit) -> None:
        """``polpo retry TASK --budget``: the task's budget from now on (the crossing flags start again)."""
        a = self.account("task", task_id, "", mission_id)
        a.raised = limit
        a.flags = 0
        self.store.submit(self.store.tx().spend(self._row(a)))

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
                return f"{a.label} is spent ({_describe(a, lim)})"
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
        spent, limit = _measure(a.spend, lim, measure)
        tx = self.store.tx().spend(self._row(a))
        reserved = round(a.reserved_usd, 6) if measure == "usd" else float(a.reserved_tokens)
        tx.event(BudgetExceeded(scope=a.scope, key=a.key, measure=measure, spent=spent, limit=limit,
                                needed=needed, in_flight=reserved if needed is not None else None,
                                period=a.period or None), **_ids(a))
        self.store.submit(tx)
        if a.scope in DAILY:
            log.warning("%s is spent: new work waits for the next UTC day", a.label)
            self._paused.set()

    def write(self, accounts: list[tuple[Account, Limit]]) -> None:
        tx = self.store.tx()
        for a, lim in accounts:
            tx.spend(self._row(a))
            if not lim.any:
                continue
            frac, measure = _fraction(a.spend, lim)
            if frac >= self.warn_at and not a.flags & WARNED:
                a.flags |= WARNED
                spent, limit = _measure(a.spend, lim, measure)
                tx.event(BudgetWarning(scope=a.scope, key=a.key, measure=measure, spent=spent, limit=limit,
                                       period=a.period or None), **_ids(a))
            crossed = spent_over(a.spend, lim)
            if crossed is not None and not a.flags & EXCEEDED:  # passed without a refusal (an estimate too low)
                a.flags |= EXCEEDED
                spent, limit = _measure(a.spend, lim, crossed)
                tx.event(BudgetExceeded(scope=a.scope, key=a.key, measure=crossed, spent=spent, limit=limit,
                                        period=a.period or None), **_ids(a))
                if a.scope in DAILY:
                    self._paused.set()
        self.store.submit(tx)

    def _row(self, a: Account) -> tuple[object, ...]:
        s = a.spend
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
    """What a call in flight reserved in each account it was checked against."""

    accounts: list[tuple[Account, Limit]]
    usd: float
    tokens: int


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

    def admit(self, model: str, estimate: Estimate) -> object:
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
                    f"{a.label} cannot fit the next call ({_describe(a, lim)}; the call could need {need})"
                    + _next_step(a), scope=a.scope)
                raise self.refused
        for a, _ in limited:
            a.reserved_usd += usd or 0.0
            a.reserved_tokens += tokens
        return _Ticket(limited, usd or 0.0, tokens)

    def record(self, ticket: object, model: str, tokens_in: int, tokens_out: int, usd: float | None) -> None:
        book = self.book
        if book is None:
            return
        if isinstance(ticket, _Ticket):
            for a, _ in ticket.accounts:
                a.reserved_usd -= ticket.usd
                a.reserved_tokens -= ticket.tokens
        if not tokens_in and not tokens_out:
            return  # the call failed: nothing the provider reported using
        accounts = [*self.fixed, *book.daily(self.agent)]
        for a, _ in accounts:
            a.spend.add(tokens_in, tokens_out, usd)
        book.write(accounts)


def _next_step(a: Account) -> str:
    if a.scope in DAILY:
        return "; new work waits for the next UTC day"
    if a.scope == "task":
        return f"; `polpo retry {a.key} --budget USD` (or --tokens N) raises it"
    return "; the mission starts no more tasks (a larger settings.budget needs a new run of its file)"


def _describe(a: Account, lim: Limit) -> str:
    parts = []
    if lim.usd is not None:
        parts.append(f"${a.spend.usd:.4f} of ${lim.usd:g}")
    if lim.tokens is not None:
        parts.append(f"{a.spend.tokens} of {lim.tokens} tokens")
    return ", ".join(parts) + " spent"


def _ids(a: Account) -> dict[str, str | None]:
    if a.scope == "task":
        return {"mission_id": a.mission_id, "task_id": a.key}
    if a.scope == "mission":
        return {"mission_id": a.key}
    return {}
