"""A budget account in memory, and a call's hold on it: its estimate counted in its accounts' stored rows before the call is sent, and
settled by the reply (:mod:`polpo.engine.spend_book` writes both).

Why durable before the call: a budget kept in memory forgets a call whose daemon dies between the provider's reply
and the write of its spend (``kill -9``, a power cut), and a task retried after each such crash could spend without
bound. So the estimate (the fitted prompt's tokens, over-counted as context fitting does, plus the reply's bound
``max_tokens``, priced by the price book) is added to each account's row and committed before the request leaves;
after the reply the settlement adds the difference between what the reply reports and the estimate (usually
negative). A crash between the two leaves the estimate counted: that is the pessimistic settlement, and it needs
no step at recovery. The rows are added to, never written whole (:mod:`polpo.store.spend_writes`), so holds and
settlements from every node simply sum.

Pure bookkeeping here: an account, the estimate and the settlement as rows' deltas, what an account has in flight, and what a
stored row will hold once this node's settlements are written (so a row read back is not counted twice).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from polpo.engine.spend_rules import Limit
from polpo.llm.spend import Spend
from polpo.store.tx import Tx

__all__ = ["Account", "Hold", "estimate", "in_flight", "projected", "settlement"]


@dataclass(slots=True, eq=False)
class Hold:
    """One call's estimate, written before the call; ``actual`` once it returned (zero when it failed), and the
    settlement's transaction until it is durable."""

    est: Spend
    actual: Spend | None = None
    settled: Tx | None = None

    @property
    def durable(self) -> bool:
        """Its settlement is written: the stored rows hold the reply's usage, not the estimate."""
        return self.settled is not None and self.settled.finished and self.settled.error is None


def estimate(tokens_in: int, most_out: int, usd: float | None) -> Spend:
    """A call's estimate as a row's delta: one call, its prompt and the most output it may be billed for."""
    return Spend(tokens_in, most_out, usd or 0.0, usd is not None, 1)


def settlement(est: Spend, actual: Spend) -> Spend:
    """What the settlement adds to each row: the reply's usage minus the estimate (a failed call's is zero)."""
    return Spend(actual.tokens_in - est.tokens_in, actual.tokens_out - est.tokens_out, actual.usd - est.usd,
                 actual.usd_known, actual.calls - est.calls)


def in_flight(holds: Iterable[Hold]) -> tuple[float, int]:
    """The USD and tokens reserved by calls not returned yet."""
    usd, tokens = 0.0, 0
    for h in holds:
        if h.actual is None:
            usd += h.est.usd
            tokens += h.est.tokens
    return usd, tokens


def projected(stored: Spend, holds: Iterable[Hold]) -> Spend:
    """``stored`` (a row read back) as it is without this node's calls in flight and with the usage of those that
    returned, as it will be once their settlements are written: what it counts of settled calls."""
    out = Spend(stored.tokens_in, stored.tokens_out, stored.usd, stored.usd_known, stored.calls)
    for h in holds:
        if h.durable:
            continue
        delta = settlement(h.est, h.actual or Spend())  # (in flight: its estimate is counted apart, in_flight)
        out.tokens_in += delta.tokens_in
        out.tokens_out += delta.tokens_out
        out.usd += delta.usd
        out.calls += delta.calls
    return out


@dataclass(slots=True)
class Account:
    scope: str
    key: str
    period: str
    mission_id: str | None
    spend: Spend = field(default_factory=Spend)
    flags: int = 0
    raised: Limit | None = None  # a task's budget as `polpo retry --budget` raised it
    holds: list[Hold] = field(default_factory=list)  # this node's calls whose settlement is not durable yet

    @property
    def reserved_usd(self) -> float:
        return in_flight(self.holds)[0]

    @property
    def reserved_tokens(self) -> int:
        return in_flight(self.holds)[1]

    def prune(self) -> None:
        """Forget the holds whose settlement is written (the rows hold the replies' usage)."""
        if self.holds:
            self.holds = [h for h in self.holds if not h.durable]

    @property
    def label(self) -> str:
        who = {"task": f"task {self.key}", "mission": f"mission {self.key}", "agent": f"agent {self.key}'s daily",
               "daemon": "the daemon's daily"}[self.scope]
        return who + " budget"
