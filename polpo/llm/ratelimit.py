"""Requests-per-minute and tokens-per-minute limits per model (or per ``api_base``), shared by every caller.

The agents, the reviewers and the judges of one daemon all go through :class:`~polpo.llm.client.LLMClient`, so
one :class:`RateLimiter` there keeps the provider's own limits (``[limits."openai/gpt-4o-mini"] rpm = 10``) for
all of them: a call waits for its slot instead of drawing a 429.

Per key, a sliding window of the last ``period`` seconds (a minute) holds the start times and token estimates of
the calls granted; a call is granted when the window has room for one more request and for its tokens. A 429
(or a ``Retry-After``) holds the whole key until then, and after it the calls are let through one per
``period / rpm`` (never a burst back at the provider that just refused one), as are calls that waited for room.
Grants are first come, first served (one waiter at a time holds the key's lock). Time is injected (a
:class:`~polpo.clock.Clock` and a sleep), so tests drive it with a ``FakeClock``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import anyio

from polpo.clock import Clock, SystemClock

__all__ = ["Limit", "RateLimiter"]

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class Limit:
    rpm: int | None = None
    """Requests started per period."""
    tpm: int | None = None
    """Tokens (prompt estimate + the reply's bound) per period."""
    period: float = 60.0


class _Window:
    def __init__(self, limit: Limit) -> None:
        self.limit = limit
        self.lock = anyio.Lock()
        self.starts: deque[float] = deque()
        self.tokens: deque[tuple[float, int]] = deque()
        self.used = 0
        self.not_before = 0.0
        self.paced_until = 0.0  # for a period after a hold or a wait for room: one call per period/rpm

    def wait(self, now: float, tokens: int) -> float:
        """Seconds before a call of ``tokens`` may start at ``now`` (0: at once). Pure on the window's state."""
        lim, edge = self.limit, now - self.limit.period
        while self.starts and self.starts[0] <= edge:
            self.starts.popleft()
        while self.tokens and self.tokens[0][0] <= edge:
            self.used -= self.tokens.popleft()[1]
        waits = [self.not_before - now]
        if lim.rpm is not None and len(self.starts) >= lim.rpm:
            waits.append(self.starts[len(self.starts) - lim.rpm] + lim.period - now)
        if lim.tpm is not None and self.tokens and self.used + tokens > lim.tpm:
            waits.append(self._tokens_free_at(tokens) - now)
        return max(waits)

    def _tokens_free_at(self, tokens: int) -> float:
        room, at = self.used + tokens - (self.limit.tpm or 0), self.tokens[-1][0]
        for t, n in self.tokens:  # the oldest calls leave the window first
            room -= n
            at = t
            if room <= 0:
                break
        return at + self.limit.period

    def grant(self, now: float, tokens: int) -> None:
        self.starts.append(now)
        if tokens:
            self.tokens.append((now, tokens))
            self.used += tokens
        if now < self.paced_until and self.limit.rpm:
            self.not_before = now + self.limit.period / self.limit.rpm


class RateLimiter:
    """Limits by key (a model string or an ``api_base``); keys without a limit cost one dictionary lookup."""

    def __init__(self, limits: Mapping[str, Limit], *, clock: Clock | None = None,
                 sleep: Sleep = anyio.sleep) -> None:
        self._windows = {key: _Window(limit) for key, limit in limits.items() if limit.rpm or limit.tpm}
        self._clock = clock or SystemClock()
        self._sleep = sleep
        self.waited = 0.0  # seconds callers spent waiting for a slot (for tests and metrics)
        self.granted = 0  # calls let through

    def key(self, model: str, api_base: str | None) -> str | None:
        """The limit a call of ``model`` at ``api_base`` falls under: the model's, else its endpoint's."""
        if model in self._windows:
            return model
        if api_base is not None and api_base in self._windows:
            return api_base
        return None

    async def acquire(self, key: str | None, tokens: int = 0) -> None:
        """Wait until a call of about ``tokens`` tokens fits the key's limits, and count it."""
        if key is None:
            return
        w = self._windows[key]
        async with w.lock:
            while True:
                now = self._clock.monotonic()
                wait = w.wait(now, tokens)
                if wait <= 0:
                    w.grant(now, tokens)
                    self.granted += 1
                    return
                w.paced_until = max(w.paced_until, now + wait + w.limit.period)
                self.waited += wait
                await self._sleep(wait)

    def hold(self, key: str | None, seconds: float) -> None:
        """The provider refused a call (429, ``Retry-After: seconds``): no call of this key starts before then,
        and the next ones are paced."""
        if key is None:
            return
        w = self._windows[key]
        w.not_before = max(w.not_before, self._clock.monotonic() + max(seconds, 0.0))
        w.paced_until = max(w.paced_until, w.not_before + w.limit.period)
