"""What LLM calls cost, and the seam through which every call is metered.

:class:`Spend` is the record of one account (a task, a mission, an agent's day, the daemon's day): tokens in and
out, USD, and whether every call in it had a known price. The engine keeps the accounts
(:mod:`polpo.engine.spend_book`) and stores them (table ``spend``); telemetry, the CLI and the web view read them.

The metering is a context variable, not a parameter: the runner sets the turn's :class:`Meter` once and every call
made under it — the agent's turns, each reviewer, samples, the expectation judge, dimension generation, in
whatever task group they run — goes through :meth:`polpo.llm.client.LLMClient.chat`, which asks the meter before
the call (:meth:`Meter.admit`, which may refuse, and otherwise holds the call's estimate in the store) and tells
it after (:meth:`Meter.record`). No caller has to
remember to pass a budget along, and a call outside any turn (``polpo calibrate``) is simply not metered.

Prices are the one price book's (:mod:`polpo.llm.prices`: ``[prices]``, then litellm's map): a call is counted at
the cost its reply was priced at, so a budget counts what ``polpo status`` shows, and a model without a price is
``None`` there and here, never free. Estimates count tokens as context fitting does (:mod:`polpo.llm.context`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol, TypeVar

__all__ = ["CURRENT_METER", "DEFAULT_MAX_OUTPUT", "BudgetRefused", "Meter", "Spend", "metering"]

DEFAULT_MAX_OUTPUT = 4096
"""The output bound assumed for a call that sets none (the estimate must cover the most a reply may cost)."""


@dataclass(slots=True)
class Spend:
    """One account's spend. ``usd_known`` is False once any call in it had no price (its USD is then a floor)."""

    tokens_in: int = 0
    tokens_out: int = 0
    usd: float = 0.0
    usd_known: bool = True
    calls: int = 0

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def add(self, tokens_in: int, tokens_out: int, usd: float | None) -> None:
        self.tokens_in += tokens_in
        self.tokens_out += tokens_out
        self.calls += 1
        if usd is None:
            self.usd_known = False
        else:
            self.usd += usd


class BudgetRefused(Exception):
    """A call that was not made: it could not fit in a budget. The message says which and what to do."""

    def __init__(self, message: str, *, scope: str) -> None:
        super().__init__(message)
        self.scope = scope


Estimate = Callable[[], tuple[int, int]]


class Meter(Protocol):
    """A turn's accounts, as the LLM client sees them."""

    async def admit(self, model: str, estimate: Estimate) -> object:
        """Before a call: a reservation to hand back to :meth:`record` (durable before it returns, when a budget
        applies), or :class:`BudgetRefused`. ``estimate`` gives (prompt tokens, most output tokens); it is called
        only when a budget applies."""
        ...

    def record(self, ticket: object, model: str, tokens_in: int, tokens_out: int, usd: float | None) -> None:
        """After a call (``tokens_*`` 0 when it failed): the reservation goes, what was used is counted at ``usd``
        (the reply's cost by the price book; None: its price is unknown)."""
        ...

    def close(self) -> None:
        """The turn is over: nothing more is metered through this meter, and it holds nothing of the engine."""
        ...


CURRENT_METER: ContextVar[Meter | None] = ContextVar("polpo_meter", default=None)
M = TypeVar("M", bound=Meter)


@contextmanager
def metering(meter: M) -> Iterator[M]:
    """Every LLM call made inside — in whatever task it runs — is metered by ``meter``, which is closed after
    (a context a library copied meanwhile, litellm's background tasks, keeps only a shell)."""
    token = CURRENT_METER.set(meter)
    try:
        yield meter
    finally:
        CURRENT_METER.reset(token)
        meter.close()
