"""What LLM calls cost, and the seam through which every call is metered.

:class:`Spend` is the record of one account (a task, a mission, an agent's day, the daemon's day): tokens in and
out, USD, and whether every call in it had a known price. The engine keeps the accounts
(:mod:`polpo.engine.spend_book`) and stores them (table ``spend``); telemetry, the CLI and the web view read them.

The metering is a context variable, not a parameter: the runner sets the turn's :class:`Meter` once and every call
made under it — the agent's turns, each reviewer, samples, the expectation judge, dimension generation, in
whatever task group they run — goes through :meth:`polpo.llm.client.LLMClient.chat`, which asks the meter before
the call (:meth:`Meter.admit`, which may refuse) and tells it after (:meth:`Meter.record`). No caller has to
remember to pass a budget along, and a call outside any turn (``polpo calibrate``) is simply not metered.

:func:`price` is the one place a model's price is looked up (litellm's price map); a model without one is
``None``, never free.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["CURRENT_METER", "DEFAULT_MAX_OUTPUT", "BudgetRefused", "Meter", "Spend", "estimate_prompt_tokens",
           "price"]

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

    def admit(self, model: str, estimate: Estimate) -> object:
        """Before a call: a reservation to hand back to :meth:`record`, or :class:`BudgetRefused`. ``estimate``
        gives (prompt tokens, most output tokens); it is called only when a budget applies."""
        ...

    def record(self, ticket: object, model: str, tokens_in: int, tokens_out: int) -> None:
        """After a call (``tokens_*`` 0 when it failed): the reservation goes, what was used is counted."""
        ...


CURRENT_METER: ContextVar[Meter | None] = ContextVar("polpo_meter", default=None)


@functools.lru_cache(maxsize=256)
def _rates(model: str) -> tuple[float, float] | None:
    """USD per input token and per output token, from litellm's price map (already imported by the client)."""
    litellm: Any = sys.modules.get("litellm")
    if litellm is None:
        return None
    try:
        per_in, _ = litellm.cost_per_token(model=model, prompt_tokens=1_000_000, completion_tokens=0)
        _, per_out = litellm.cost_per_token(model=model, prompt_tokens=0, completion_tokens=1_000_000)
    except Exception:
        return None
    return float(per_in) / 1_000_000, float(per_out) / 1_000_000


def price(model: str, tokens_in: int, tokens_out: int) -> float | None:
    """What a call of ``model`` with these tokens costs in USD; None when the model has no known price."""
    rates = _rates(model)
    if rates is None:
        if "litellm" in sys.modules:
            return None
        _rates.cache_clear()  # asked before litellm was imported: do not remember "unknown"
        return None
    return tokens_in * rates[0] + tokens_out * rates[1]


def estimate_prompt_tokens(messages: Sequence[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
    """An upper estimate of a request's prompt tokens: 3 characters a token (tokenizers average ~4 on English
    and code), plus each message's framing. Cheap: no tokenizer, the tools' schemas measured once per list."""
    chars = 0
    for m in messages:
        c = m.get("content")
        if isinstance(c, str):
            chars += len(c) + 16
        elif c is not None:
            chars += len(str(c)) + 16
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            chars += len(fn.get("arguments") or "") + len(fn.get("name") or "") + 32
    if tools:
        chars += _tools_chars(tools)
    return chars // 3 + 8


_tools_seen: dict[int, tuple[list[dict[str, Any]], int]] = {}


def _tools_chars(tools: list[dict[str, Any]]) -> int:
    hit = _tools_seen.get(id(tools))
    if hit is not None and hit[0] is tools:
        return hit[1]
    import orjson

    n = len(orjson.dumps(tools))
    if len(_tools_seen) > 64:
        _tools_seen.clear()
    _tools_seen[id(tools)] = (tools, n)
    return n
