"""What makes a panel's seats more than copies of one reviewer. Pure.

Measured on Qwen2.5-Coder-1.5B at temperature 0, three seats of one model returned the same score on 20 of 20
items for two of them: three calls bought no second opinion. With ``[judge] diversity`` on (the default) each
seat after the first differs on purpose:

* **its angle**: a framing of the rubric (a tester hunting for the input that breaks the work; the person who
  asked, checking every case the task names);
* **the order it is shown the evidence** (models over-weigh what comes first);
* **its sampling**: a seat whose model is set to temperature 0 samples at :data:`SEAT_TEMPERATURE` with a seed
  of its own, so its run is repeatable and still its own.

Different models per seat (``[judge] models``) differ already. :func:`copies` tells when seats were copies anyway
(one model, deterministic, same angle and order): their agreement is then not evidence of anything, and
``polpo calibrate`` and ``polpo show`` say so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from polpo.llm.client import ModelSettings

__all__ = ["FRAMINGS", "SEAT_TEMPERATURE", "SeatPlan", "copies", "plan_seats"]

SEAT_TEMPERATURE = 0.7
FRAMINGS: tuple[str, ...] = (
    "",
    "Judge it as a tester would: look for the inputs and cases where the work gives a wrong result, and run them "
    "if you can.",
    "Judge it as the person who asked for it: go through every case and example the task names and check that "
    "the work handles each one.",
    "Judge it as the maintainer who must keep it: is it correct first, then clear and robust?",
)


@dataclass(frozen=True)
class SeatPlan:
    seat: int
    framing: str = ""
    order: tuple[int, ...] | None = None
    """The evidence items' positions in the order this seat sees them (None: as gathered)."""
    temperature: float | None = None
    seed: int | None = None

    def settings(self, base: ModelSettings) -> ModelSettings:
        """The seat's model settings: the configured ones with its own sampling, where it has one."""
        if self.temperature is None and self.seed is None:
            return base
        return replace(base, temperature=self.temperature, seed=self.seed)

    def to_json(self) -> dict[str, Any]:
        return {"seat": self.seat, "framing": self.framing, "order": list(self.order) if self.order else None,
                "temperature": self.temperature, "seed": self.seed}


def _rotated(n: int, by: int) -> tuple[int, ...] | None:
    if n < 2 or by % n == 0:
        return None
    return tuple(list(range(n))[-(by % n):] + list(range(n))[:-(by % n)])


def plan_seats(models: Sequence[ModelSettings], evidence_items: int, *, diversity: bool = True) -> list[SeatPlan]:
    """One plan per seat. Seat 0 is the configured reviewer as it is; with ``diversity`` each later seat gets an
    angle, the evidence rotated (the items that came last first), and, when its model would be deterministic,
    sampling at :data:`SEAT_TEMPERATURE` with the seed ``1000 + seat``."""
    plans = []
    for seat, settings in enumerate(models):
        if not diversity or seat == 0:
            plans.append(SeatPlan(seat))
            continue
        deterministic = settings.temperature == 0  # the provider's default (None) samples already
        plans.append(SeatPlan(seat, FRAMINGS[seat % len(FRAMINGS)] or FRAMINGS[1],
                              _rotated(evidence_items, seat),
                              SEAT_TEMPERATURE if deterministic else None, 1000 + seat if deterministic else None))
    return plans


def copies(models: Sequence[ModelSettings], plans: Sequence[SeatPlan]) -> bool:
    """Whether the seats were copies of one reviewer: more than one seat, one model, sampled deterministically
    (temperature 0), the same angle and evidence order. Their agreement then says nothing."""
    if len(models) < 2:
        return False
    seen = {(m.model, m.api_base, p.framing, p.order) for m, p in zip(models, plans, strict=True)}
    temps = {p.temperature if p.temperature is not None else m.temperature for m, p in zip(models, plans, strict=True)}
    return len(seen) == 1 and temps <= {0}
