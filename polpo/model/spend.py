"""A mission's spend, from the rows that record it: tokens in and out and USD per task, agent, phase and model.

Every view (``polpo status``, ``polpo show``, the web view, ``mission:completed``'s report) sums the same rows
with this one function, so they agree to the cent. Pure: rows in, a JSON-ready document out.

Sources: an attempt's agent calls (``attempts.tokens_in/out, cost``) and each reviewer's and the expectation
judge's calls (``reviews.tokens_in/out, cost``). A row with tokens but no cost was made by a model with no known
price (:mod:`polpo.llm.prices`): its tokens count, its cost does not, and the spend says ``costUnknown`` and
names the model, instead of passing the calls off as free.

Phases: ``agent`` (the first attempt's agent), ``fixes`` and ``retries`` (the agent's later attempts), and
``review`` (every reviewer, sample and judge call, whichever attempt they assessed).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AttemptSpend", "ReviewSpend", "SpendRows", "Tally", "mission_spend", "usd_text"]

PHASE_OF_KIND = {"initial": "agent", "fix": "fixes", "retry": "retries"}
PHASES = ("agent", "review", "fixes", "retries")


@dataclass(frozen=True)
class AttemptSpend:
    task_id: str
    kind: str
    agent: str
    model: str | None
    tokens_in: int
    tokens_out: int
    cost: float | None
    at: str | None = None  # when the attempt ended (ISO), for the spend over time; None when not read

    @classmethod
    def of(cls, task_id: str, kind: str, agent: str, model: str | None, tokens: int | None,
           tokens_in: int | None, tokens_out: int | None, cost: float | None,
           at: str | None = None) -> AttemptSpend | None:
        """From an attempt's columns; None for an attempt without LLM calls (before schema v7 only the sum of
        the tokens was kept: it counts as input)."""
        if not (tokens or tokens_in or tokens_out or cost):
            return None
        return cls(task_id, kind, agent, model, tokens_in if tokens_in is not None else (tokens or 0),
                   tokens_out or 0, cost, at)


@dataclass(frozen=True)
class ReviewSpend:
    task_id: str
    role: str  # reviewer | judge
    model: str
    tokens_in: int
    tokens_out: int
    cost: float | None
    at: str | None = None  # when the review was stored (ISO), for the spend over time


@dataclass
class SpendRows:
    """A mission's spend rows as its daemon wrote them (kept on the mission, for the report), by the key of
    the row each mirrors: a row written again replaces the earlier one here as in the store."""

    attempts: dict[str, AttemptSpend] = field(default_factory=dict)  # attempt id ->
    reviews: dict[tuple[str, int, int], ReviewSpend] = field(default_factory=dict)  # (assessment, check, seat) ->

    def summary(self) -> dict[str, Any]:
        return mission_spend(self.attempts.values(), self.reviews.values())

    def add_review_row(self, r: Any) -> None:
        """A stored ``reviews`` row (assessment_id, check_idx, reviewer, task_id, model, tokens_in, tokens_out,
        cost, created_at), as :func:`polpo.store.spend_read.spend` counts it."""
        role = "judge" if str(r["assessment_id"]).endswith("/judge") else "reviewer"
        self.reviews[(r["assessment_id"], r["check_idx"], r["reviewer"])] = ReviewSpend(
            r["task_id"], role, r["model"], r["tokens_in"] or 0, r["tokens_out"] or 0, r["cost"], r["created_at"])


@dataclass
class Tally:
    tokens_in: int = 0
    tokens_out: int = 0
    costs: list[float] = field(default_factory=list)
    unpriced: set[str] = field(default_factory=set)

    def add(self, model: str | None, tokens_in: int, tokens_out: int, cost: float | None) -> None:
        self.tokens_in += tokens_in
        self.tokens_out += tokens_out
        if cost is not None:
            self.costs.append(cost)
        elif tokens_in or tokens_out:
            self.unpriced.add(model or "?")

    @property
    def usd(self) -> float:
        return math.fsum(self.costs)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tokensIn": self.tokens_in, "tokensOut": self.tokens_out, "usd": round(self.usd, 6)}
        if self.unpriced:
            out["costUnknown"] = sorted(self.unpriced)
        return out


OVER_TIME_POINTS = 200  # at most this many points in a mission's spend over time (the last one always kept)


def over_time(spends: Iterable[tuple[str | None, float | None, int]]) -> list[dict[str, Any]]:
    """The cumulative spend after each call group that ended, oldest first: ``[{at, usd, tokens}]`` (USD of the
    priced calls; tokens of all), thinned evenly to :data:`OVER_TIME_POINTS`."""
    points: list[dict[str, Any]] = []
    usd, tokens = 0.0, 0
    for at, cost, used in sorted((s for s in spends if s[0] and (s[1] or s[2])), key=lambda s: str(s[0])):
        usd += cost or 0.0
        tokens += used
        points.append({"at": at, "usd": round(usd, 6), "tokens": tokens})
    if len(points) > OVER_TIME_POINTS:
        step = len(points) / (OVER_TIME_POINTS - 1)
        points = [points[int(i * step)] for i in range(OVER_TIME_POINTS - 1)] + [points[-1]]
    return points


def mission_spend(attempts: Iterable[AttemptSpend], reviews: Iterable[ReviewSpend]) -> dict[str, Any]:
    """``{total, byPhase, byTask, byAgent, byModel}``, each a tally ``{tokensIn, tokensOut, usd[, costUnknown]}``."""
    total = Tally()
    phases = {p: Tally() for p in PHASES}
    tasks: dict[str, Tally] = {}
    agents: dict[str, Tally] = {}
    models: dict[str, Tally] = {}
    for a in attempts:
        if not (a.tokens_in or a.tokens_out or a.cost):
            continue  # a command agent: no LLM calls of polpo's
        for t in (total, phases[PHASE_OF_KIND.get(a.kind, "agent")], tasks.setdefault(a.task_id, Tally()),
                  agents.setdefault(a.agent, Tally()), models.setdefault(a.model or "?", Tally())):
            t.add(a.model, a.tokens_in, a.tokens_out, a.cost)
    for r in reviews:
        for t in (total, phases["review"], tasks.setdefault(r.task_id, Tally()), models.setdefault(r.model, Tally())):
            t.add(r.model, r.tokens_in, r.tokens_out, r.cost)
    return {"total": total.to_json(), "byPhase": {p: t.to_json() for p, t in phases.items()},
            "overTime": over_time([(a.at, a.cost, a.tokens_in + a.tokens_out) for a in attempts]
                                  + [(r.at, r.cost, r.tokens_in + r.tokens_out) for r in reviews]),
            "byTask": {k: t.to_json() for k, t in sorted(tasks.items())},
            "byAgent": {k: t.to_json() for k, t in sorted(agents.items())},
            "byModel": {k: t.to_json() for k, t in sorted(models.items())}}


def usd_text(tally: dict[str, Any]) -> str:
    """``$0.0123, 1200 in / 300 out tokens`` (``cost unknown for MODEL`` when a model has no price)."""
    tokens = f"{tally.get('tokensIn', 0)} in / {tally.get('tokensOut', 0)} out tokens"
    unknown = tally.get("costUnknown")
    cost = f"${tally.get('usd', 0.0):.4f}"
    if unknown:
        cost += f" + cost unknown for {', '.join(unknown)}"
    return f"{cost}, {tokens}"
