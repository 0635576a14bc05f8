"""Full jitter: every retry and backoff loop waits a random time between 0 and its nominal delay.

Callers that failed together (three reviewers times N tasks meeting one 429, every webhook of a down receiver,
every task of an outage) would otherwise try again together, in lockstep, and fail together again. "Full
jitter" (a uniform draw up to the capped exponential delay) spreads them best for the least total wait
(AWS Architecture Blog, "Exponential Backoff And Jitter"). A dozen lines needs no retry library: each loop keeps
its own rules (which errors retry, ``Retry-After``, events between tries, an injected sleep).
"""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = ["backoff", "full_jitter"]


def full_jitter(nominal: float, rng: Callable[[], float] = random.random) -> float:
    """A uniform draw in [0, ``nominal``)."""
    return max(nominal, 0.0) * rng()


def backoff(attempt: int, first: float, cap: float, rng: Callable[[], float] = random.random) -> float:
    """Try ``attempt`` (1-based): full jitter over ``first`` doubled ``attempt - 1`` times, capped at ``cap``."""
    return full_jitter(min(first * 2.0 ** (attempt - 1), cap), rng)
