"""What a budget decides, pure: its limits, whether a call fits, what is spent (:mod:`polpo.engine.spend_book`
keeps the accounts and acts on these)."""

from __future__ import annotations

from dataclasses import dataclass

from polpo.llm.spend import Spend
from polpo.mission.schema import Budget, MissionSpec, TaskSpec

__all__ = ["NO_LIMIT", "Limit", "describe", "fraction", "limit_of", "measure_of", "over", "spent_over", "task_limit"]


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


def fraction(spend: Spend, limit: Limit) -> tuple[float, str]:
    fracs = []
    if limit.usd is not None:
        fracs.append((spend.usd / limit.usd, "usd"))
    if limit.tokens is not None:
        fracs.append((spend.tokens / limit.tokens, "tokens"))
    return max(fracs) if fracs else (0.0, "usd")


def measure_of(spend: Spend, limit: Limit, measure: str) -> tuple[float, float]:
    if measure == "usd":
        return round(spend.usd, 6), float(limit.usd or 0)
    return float(spend.tokens), float(limit.tokens or 0)


def describe(spend: Spend, lim: Limit) -> str:
    """How much of a budget is spent, in its measures. Pure."""
    parts = []
    if lim.usd is not None:
        parts.append(f"${spend.usd:.4f} of ${lim.usd:g}")
    if lim.tokens is not None:
        parts.append(f"{spend.tokens} of {lim.tokens} tokens")
    return ", ".join(parts) + " spent"
