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

Failed reviewers (``None``) are left out. With one successful reviewer its scores are used as they are
(``single_reviewer``), with none there is no consensus (``None``).

A reviewer that did not score a dimension simply does not vote on it: that dimension's consensus uses the others'
scores (with one voter left, that voter's score). A dimension nobody scored is listed in ``unscored``, left out of
the global score, and makes the check fail, because passing on part of the rubric would hide a gap. Scores for
names that are not in the dimension list are ignored. Names are matched with
:func:`~polpo.review.dimensions.dim_key` (case and punctuation insensitive).

Global score = Σ score·weight / Σ weight over the scored dimensions, rounded to 9 decimals only to absorb float
noise (0.35·3 + 0.30·3 + … must be exactly 3.0, so an all-3 review passes a 3.0 threshold); pass iff
global ≥ threshold.
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
    "consensus",
    "robust_median",
    "weighted_score",
]

OUTLIER_DISTANCE = 1.5
SCORE_MIN, SCORE_MAX = 1.0, 5.0


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
    reasoning: str = ""
    evidence: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"dimension": self.dimension, "score": self.score, "reasoning": self.reasoning,
                "evidence": list(self.evidence)}


@dataclass(frozen=True)
class Review:
    """The scores of one successful reviewer; ``reviewer`` is its index in the panel."""

    reviewer: int
    scores: Sequence[DimScore]


@dataclass(frozen=True)
class DimensionResult:
    dimension: str
    score: float
    weight: float
    reasoning: str
    evidence: list[dict[str, Any]]
    reviewer_scores: list[dict[str, Any]]
    """``[{reviewer, score, kept}]`` in reviewer order: every vote, and whether it survived outlier removal."""
    median: float
    """The median of all votes, before outliers were dropped."""
    from_reviewer: int
    """Whose reasoning and evidence are shown."""

    def to_json(self) -> dict[str, Any]:
        return {"dimension": self.dimension, "score": self.score, "weight": self.weight,
                "reasoning": self.reasoning, "evidence": list(self.evidence),
                "reviewerScores": list(self.reviewer_scores), "median": self.median,
                "fromReviewer": self.from_reviewer}


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

    def to_json(self) -> dict[str, Any]:
        return {"scores": [s.to_json() for s in self.scores], "globalScore": self.global_score,
                "passed": self.passed, "threshold": self.threshold, "reviewers": list(self.reviewers),
                "singleReviewer": self.single_reviewer, "unscored": list(self.unscored)}


def robust_median(values: Sequence[float]) -> tuple[float, float, list[bool]]:
    """``(final, median, kept)`` for one dimension's votes: median, outliers dropped, median again.

    ``kept[i]`` says whether ``values[i]`` survived. Raises ValueError on an empty sequence.
    """
    if not values:
        raise ValueError("no scores")
    med = float(statistics.median(values))
    kept = [abs(v - med) <= OUTLIER_DISTANCE for v in values]
    if not any(kept):
        kept = [True] * len(values)
    final = float(statistics.median([v for v, k in zip(values, kept, strict=True) if k]))
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


def consensus(reviews: Sequence[Review | None], dims: Sequence[WeightedDimension],
              threshold: float) -> Consensus | None:
    """The panel's verdict from its successful reviews, or None when no reviewer succeeded."""
    ok = [r for r in reviews if r is not None]
    if not ok:
        return None
    tables = [(r.reviewer, _by_key(r)) for r in ok]
    results: list[DimensionResult] = []
    unscored: list[str] = []
    for d in dims:
        key = dim_key(d.name)
        votes = [(idx, table[key]) for idx, table in tables if key in table]
        if not votes:
            unscored.append(d.name)
            continue
        values = [v.score for _, v in votes]
        final, med, kept = robust_median(values)
        candidates = [(abs(v.score - final), v.score, idx, v)
                      for (idx, v), k in zip(votes, kept, strict=True) if k]
        _, _, chosen_idx, chosen = min(candidates, key=lambda c: (c[0], c[1], c[2]))
        results.append(DimensionResult(
            dimension=d.name, score=final, weight=d.weight, reasoning=chosen.reasoning,
            evidence=list(chosen.evidence),
            reviewer_scores=[{"reviewer": idx, "score": v.score, "kept": k}
                             for (idx, v), k in zip(votes, kept, strict=True)],
            median=med, from_reviewer=chosen_idx))
    global_score = weighted_score([(r.score, r.weight) for r in results])
    passed = bool(results) and not unscored and global_score >= threshold
    return Consensus(scores=results, global_score=global_score, passed=passed, threshold=threshold,
                     reviewers=[r.reviewer for r in ok], single_reviewer=len(ok) == 1, unscored=unscored)
