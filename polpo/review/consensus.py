"""Median consensus of the reviewers' scores, per dimension, and the weighted global score. Pure.

Per dimension:

1. ``med`` = median of the scores of the reviewers that scored it (even count: mean of the two middle values);
2. scores more than :data:`OUTLIER_DISTANCE` (1.5) from ``med`` are dropped (if that drops every score, as with
   ``[1, 5]``, all are kept);
3. the final score is the median of the kept scores, **not rounded**: ``[2, 4, 5]`` → med 4, the 2 is dropped,
   final 4.5. (Polpo rounded half-up to 5; rounding would turn a split panel into a unanimous one.)
4. reasoning and evidence come from the kept reviewer whose score is nearest the final score; on a tie the
   *lower* score wins (its reasoning names the problems, which is what a fix needs), then the lower reviewer
   index. So with ``[1, 2, 5]`` (final 1.5) the text comes from the "1" reviewer, and with ``[3, 3, 5]`` from a
   "3" reviewer, never from the dropped "5".

Votes, by how many reviewers (seats) produced scores — the rules ``[judge] reviewer_error`` chooses between:

* **3 votes**: the robust median above.
* **2 votes**: the median of two is their mean; two votes more than 3 apart would both be "outliers", so both
  are kept (``[1, 5]`` → 3).
* **1 vote**: that reviewer's scores are used as they are (``single_reviewer``).
* **0 votes**: no consensus (``None``): the work was not judged, which is an error of the review, never a fail.

A seat whose reviewer crashed (provider error, timeout, no valid scores) **abstains** by default: it is left
out and the rules above apply to the others. With ``fail_vote`` (``reviewer_error = "fail"``) it votes 1 on
every dimension instead, marked ``crashed`` — as long as at least one seat really voted (three crashed seats are
still 0 votes, an outage, not a verdict). So ``[1 (crashed), 4, 4]`` → 4 (the crash is an outlier) but
``[1, 1 (crashed), 4]`` → 1.

Samples: a seat may score several times (``Review.voter`` names the seat, ``reviewer`` the run). A seat's vote on
a dimension is the median of its samples; the consensus runs over the seats' votes. ``spread`` keeps the mean,
median and (population) standard deviation of every sample vote.

A reviewer that did not score a dimension simply does not vote on it: that dimension's consensus uses the others'
scores (with one voter left, that voter's score). A dimension nobody scored is listed in ``unscored``, left out of
the global score, and makes the check fail, because passing on part of the rubric would hide a gap. Scores for
names that are not in the dimension list are ignored. Names are matched with
:func:`~polpo.review.dimensions.dim_key` (case and punctuation insensitive).

Global score = Σ score·weight / Σ weight over the scored dimensions, rounded to 9 decimals only to absorb float
noise (0.35·3 + 0.30·3 + … must be exactly 3.0, so an all-3 review passes a 3.0 threshold); pass iff
global ≥ threshold.

**Evidence.** A vote whose reasoning cites no evidence (``DimScore.cited`` False, see
:mod:`polpo.review.citations`) weighs :data:`UNCITED_WEIGHT` against a cited vote's 1 in its dimension's median
(a weighted median: the smallest vote at which the votes at or below it hold half the weight). Alone, it is the
verdict, and the result says it rests on no cited evidence. A crash vote weighs as much as the heaviest real vote
of its dimension, never more: two uncited 4s still outvote one failed reviewer's 1.

**Critical dimensions.** A weighted mean lets good style pay for wrong behaviour: with the default weights a
function that is wrong (correctness 2) and tidy (4s elsewhere) scored 3.3 and passed. A dimension marked
``critical`` (the default ``correctness`` is) caps the global score at its own when it falls below the
threshold, so the work fails on it and the number says by how much (``capped_by`` names it).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from polpo.review.dimensions import dim_key

__all__ = [
    "OUTLIER_DISTANCE",
    "Consensus",
    "DimScore",
    "DimensionResult",
    "Review",
    "WeightedDimension",
    "capped_score",
    "consensus",
    "pstdev",
    "robust_median",
    "spread_of",
    "weighted_median",
    "weighted_score",
]

OUTLIER_DISTANCE = 1.5
SCORE_MIN, SCORE_MAX = 1.0, 5.0
UNCITED_WEIGHT = 0.5


class WeightedDimension(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def weight(self) -> float: ...


@dataclass(frozen=True)
class DimScore:
    """One reviewer's score for one dimension."""

    dimension: str
    score: float
    """The probability-weighted score where the provider gave the distribution, else the sampled one."""
    reasoning: str = ""
    evidence: list[dict[str, Any]] = field(default_factory=list)
    sampled: float | None = None
    """The score the model wrote, when ``score`` is its probability-weighted mean instead."""
    dist: Mapping[str, Any] | None = None
    """``{"probs": {"1": p, …}, "mass": m}`` of the score token (:mod:`polpo.review.geval`)."""
    cited: bool | None = None
    """Whether the reasoning cites evidence (None: not checked)."""
    from_questions: list[dict[str, Any]] | None = None
    """The checklist answers the score was derived from, when the dimension has questions."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dimension": self.dimension, "score": self.score, "reasoning": self.reasoning,
                               "evidence": list(self.evidence)}
        if self.sampled is not None:
            out["sampled"] = self.sampled
        if self.dist is not None:
            out["dist"] = dict(self.dist)
        if self.cited is not None:
            out["cited"] = self.cited
        if self.from_questions is not None:
            out["questions"] = list(self.from_questions)
        return out

    @classmethod
    def from_json(cls, s: Mapping[str, Any]) -> DimScore:
        return cls(str(s["dimension"]), float(s["score"]), str(s.get("reasoning") or ""),
                   list(s.get("evidence") or []), s.get("sampled"), s.get("dist"), s.get("cited"),
                   s.get("questions"))


@dataclass(frozen=True)
class Review:
    """The scores of one successful reviewer run; ``reviewer`` is the run's index, ``voter`` its seat in the
    panel (default: the same number; samples and re-runs of a seat share its ``voter``)."""

    reviewer: int
    scores: Sequence[DimScore]
    voter: int | None = None

    @property
    def seat(self) -> int:
        return self.reviewer if self.voter is None else self.voter


@dataclass(frozen=True)
class DimensionResult:
    dimension: str
    score: float
    weight: float
    reasoning: str
    evidence: list[dict[str, Any]]
    reviewer_scores: list[dict[str, Any]]
    """``[{reviewer, score, kept}]`` in seat order: every vote, and whether it survived outlier removal; a
    dropped vote has ``why``, a crashed seat's vote ``crashed``, a sampled seat its ``samples``."""
    median: float
    """The median of all votes, before outliers were dropped."""
    from_reviewer: int
    """Whose reasoning and evidence are shown (the reviewer run's index)."""
    spread: dict[str, Any] = field(default_factory=dict)
    """``{mean, median, std, votes}`` over every sample vote (crash votes excluded)."""
    raw_score: float | None = None
    """The score before ``[judge] calibration`` (None when no calibration applies)."""
    dist: Mapping[str, Any] | None = None
    """The shown reviewer's score distribution, when its score is probability-weighted."""

    def to_json(self) -> dict[str, Any]:
        out = {"dimension": self.dimension, "score": self.score, "weight": self.weight,
               "reasoning": self.reasoning, "evidence": list(self.evidence),
               "reviewerScores": list(self.reviewer_scores), "median": self.median,
               "fromReviewer": self.from_reviewer}
        if self.spread:
            out["spread"] = dict(self.spread)
        if self.raw_score is not None:
            out["rawScore"] = self.raw_score
        if self.dist is not None:
            out["dist"] = dict(self.dist)
        return out


@dataclass(frozen=True)
class Consensus:
    scores: list[DimensionResult]
    global_score: float
    passed: bool
    threshold: float
    reviewers: list[int]
    """Indices of the reviewers whose scores were used."""
    single_reviewer: bool
    unscored: list[str]
    capped_by: list[str] = field(default_factory=list)
    """Critical dimensions below the threshold that capped the global score."""

    def to_json(self) -> dict[str, Any]:
        return {"scores": [s.to_json() for s in self.scores], "globalScore": self.global_score,
                "passed": self.passed, "threshold": self.threshold, "reviewers": list(self.reviewers),
                "singleReviewer": self.single_reviewer, "unscored": list(self.unscored),
                "cappedBy": list(self.capped_by)}


def weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    """The median with weights; equal weights give :func:`statistics.median` exactly (an even count: the mean of
    the two middle values), so unweighted panels keep their verdicts."""
    if len(set(weights)) <= 1:
        return float(statistics.median(values))
    pairs = sorted(zip(values, weights, strict=True))
    half = math.fsum(weights) / 2
    acc = 0.0
    for i, (v, w) in enumerate(pairs):
        acc += w
        if math.isclose(acc, half):
            return (v + pairs[i + 1][0]) / 2 if i + 1 < len(pairs) else v
        if acc > half:
            return v
    return pairs[-1][0]


def robust_median(values: Sequence[float], weights: Sequence[float] | None = None,
                  ) -> tuple[float, float, list[bool]]:
    """``(final, median, kept)`` for one dimension's votes: median, outliers dropped, median again (weighted by
    ``weights`` when given).

    ``kept[i]`` says whether ``values[i]`` survived. Raises ValueError on an empty sequence.
    """
    if not values:
        raise ValueError("no scores")
    w = list(weights) if weights is not None else [1.0] * len(values)
    med = weighted_median(values, w)
    kept = [abs(v - med) <= OUTLIER_DISTANCE for v in values]
    if not any(kept):
        kept = [True] * len(values)
    final = weighted_median([v for v, k in zip(values, kept, strict=True) if k],
                            [x for x, k in zip(w, kept, strict=True) if k])
    return final, med, kept


def _clamp(score: float) -> float:
    return min(SCORE_MAX, max(SCORE_MIN, score))


def weighted_score(pairs: Sequence[tuple[float, float]]) -> float:
    """Σ score·weight / Σ weight of ``(score, weight)`` pairs; scores clamped to 1..5; 0.0 if Σ weight ≤ 0."""
    total = math.fsum(w for _, w in pairs)
    if total <= 0:
        return 0.0
    return round(math.fsum(_clamp(s) * w for s, w in pairs) / total, 9)


def _by_key(review: Review) -> Mapping[str, DimScore]:
    out: dict[str, DimScore] = {}
    for s in review.scores:
        out.setdefault(dim_key(s.dimension), s)  # a repeated dimension: the first answer counts
    return out


def pstdev(values: Sequence[float]) -> float:
    """Population standard deviation, in floats (``statistics.pstdev`` is exact and ~20× slower)."""
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))


def spread_of(values: Sequence[float]) -> dict[str, Any]:
    """``{mean, median, std, votes}`` of some votes (population standard deviation). Pure."""
    vals = [float(v) for v in values]
    return {"mean": round(math.fsum(vals) / len(vals), 6), "median": float(statistics.median(vals)),
            "std": round(pstdev(vals), 6), "votes": vals}


def _why(vote: float, med: float) -> str:
    return f"{abs(vote - med):g} from the median {med:g} (more than {OUTLIER_DISTANCE:g})"


def consensus(reviews: Sequence[Review | None], dims: Sequence[WeightedDimension], threshold: float, *,
              crashed: Sequence[int] = (), fail_vote: bool = False) -> Consensus | None:
    """The panel's verdict from its successful reviews, or None when no reviewer succeeded.

    ``crashed`` lists the seats none of whose runs succeeded; with ``fail_vote`` each votes 1 on every dimension
    (see the module docstring).
    """
    ok = [r for r in reviews if r is not None]
    if not ok:
        return None
    seats: dict[int, list[tuple[int, Mapping[str, DimScore]]]] = {}
    for r in ok:
        seats.setdefault(r.seat, []).append((r.reviewer, _by_key(r)))
    failing = sorted(set(crashed) - set(seats)) if fail_vote else []
    results: list[DimensionResult] = []
    unscored: list[str] = []
    for d in dims:
        key = dim_key(d.name)
        scored = any(key in t for runs in seats.values() for _, t in runs)
        votes: list[tuple[int, float, list[tuple[int, DimScore]], bool]] = []  # seat, vote, samples, crashed
        for seat in sorted([*seats, *failing]):
            if seat in seats:
                samples = [(idx, table[key]) for idx, table in seats[seat] if key in table]
                if samples:
                    votes.append((seat, float(statistics.median(v.score for _, v in samples)), samples, False))
            elif scored:
                votes.append((seat, SCORE_MIN, [], True))
        if not scored:
            unscored.append(d.name)
            continue
        values = [v for _, v, _, _ in votes]
        weights = _vote_weights(votes)
        final, med, kept = robust_median(values, weights)
        candidates = [(abs(sc.score - final), sc.score, idx, sc)
                      for (_, _, samples, _), k in zip(votes, kept, strict=True) if k for idx, sc in samples]
        if not candidates:  # only crash votes were kept: the nearest real sample explains the score
            candidates = [(abs(sc.score - final), sc.score, idx, sc) for *_, samples, _ in votes
                          for idx, sc in samples]
        _, _, chosen_idx, chosen = min(candidates, key=lambda c: (c[0], c[1], c[2]))
        entries: list[dict[str, Any]] = []
        for (seat, vote, samples, was_crash), k in zip(votes, kept, strict=True):
            entry: dict[str, Any] = {"reviewer": seat, "score": vote, "kept": k}
            if len(samples) > 1:
                entry["samples"] = [sc.score for _, sc in samples]
            if was_crash:
                entry["crashed"] = True
            if samples and all(sc.cited is False for _, sc in samples):
                entry["uncited"] = True
            if not k:
                entry["why"] = _why(vote, med)
            entries.append(entry)
        all_samples = [sc.score for *_, samples, _ in votes for _, sc in samples]
        results.append(DimensionResult(
            dimension=d.name, score=final, weight=d.weight, reasoning=chosen.reasoning,
            evidence=list(chosen.evidence), reviewer_scores=entries, median=med, from_reviewer=chosen_idx,
            spread=spread_of(all_samples), dist=chosen.dist))
    global_score, capped = capped_score(results, dims, threshold)
    passed = bool(results) and not unscored and global_score >= threshold
    return Consensus(scores=results, global_score=global_score, passed=passed, threshold=threshold,
                     reviewers=[r.reviewer for r in ok], single_reviewer=len(seats) == 1, unscored=unscored,
                     capped_by=capped)


def _vote_weights(votes: Sequence[tuple[int, float, list[tuple[int, DimScore]], bool]]) -> list[float]:
    """Each vote's weight in its dimension's median: 1 for a cited vote, :data:`UNCITED_WEIGHT` for one whose
    samples all cite nothing, and a crash vote (``reviewer_error = "fail"``) the weight of the heaviest real vote:
    a reviewer that failed cites nothing either, and must not outweigh reviewers that did review."""
    own = [None if crashed else UNCITED_WEIGHT if all(sc.cited is False for _, sc in samples) else 1.0
           for _, _, samples, crashed in votes]
    heaviest = max((w for w in own if w is not None), default=1.0)
    return [heaviest if w is None else w for w in own]


def capped_score(results: Sequence[DimensionResult], dims: Sequence[WeightedDimension],
                 threshold: float) -> tuple[float, list[str]]:
    """The weighted global score, capped by any critical dimension scoring below ``threshold`` (see the module
    docstring), and the names of those dimensions."""
    score = weighted_score([(r.score, r.weight) for r in results])
    critical = {dim_key(d.name) for d in dims if getattr(d, "critical", False)}
    low = [r for r in results if dim_key(r.dimension) in critical and r.score < threshold]
    if not low:
        return score, []
    return min(score, min(_clamp(r.score) for r in low)), [r.dimension for r in low]
