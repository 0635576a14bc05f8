"""Agreement with human labels, and the linear calibration ``[judge] calibration`` applies. Pure.

* :func:`spearman` — rank correlation (ties get their average rank; Pearson's r of the ranks).
* :func:`weighted_kappa` — Cohen's κ with quadratic weights over the 1..5 scale: ``1 − Σ w·O / Σ w·E`` where
  ``O`` is the confusion matrix of the two raters, ``E`` the matrix expected by chance (the outer product of their
  marginals over N) and ``w[i][j] = (i − j)² / (k − 1)²``. Scores are rounded to the nearest level first (half up).
* :func:`linear_fit` — least squares ``human ≈ scale · panel + bias``, the calibration ``polpo calibrate --write``
  stores; :class:`Calibration` applies it to a raw score, clamped to 1..5.

A calibration file is JSON ``{"scale": s, "bias": b, …}`` (other keys — how it was made — are kept for people).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeGuard

from polpo.review.consensus import SCORE_MAX, SCORE_MIN, Consensus, weighted_score
from polpo.review.rule import Rule

__all__ = ["LEVELS", "Calibration", "calibrate_consensus", "level", "linear_fit", "load_calibration", "mean_bias",
           "spearman", "weighted_kappa"]

LEVELS = (1, 2, 3, 4, 5)


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1  # ties share the mean of their 1-based positions
        i = j + 1
    return ranks


def _pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    mx, my = statistics.fmean(x), statistics.fmean(y)
    sxy = math.fsum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = math.fsum((a - mx) ** 2 for a in x)
    syy = math.fsum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's ρ, or None with fewer than 2 pairs or when either side is constant."""
    if len(x) != len(y):
        raise ValueError("spearman needs two sequences of the same length")
    if len(x) < 2:
        return None
    return _pearson(_ranks(x), _ranks(y))


def level(score: float) -> int:
    """A score on the 1..5 scale as a level: rounded half up, clamped (3.5 → 4, 2.49 → 2)."""
    return int(min(SCORE_MAX, max(SCORE_MIN, math.floor(score + 0.5))))


def weighted_kappa(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Quadratic-weighted Cohen's κ of two raters on the 1..5 levels; None when chance disagreement is 0."""
    if len(a) != len(b):
        raise ValueError("weighted_kappa needs two sequences of the same length")
    if not a:
        return None
    k = len(LEVELS)
    observed = [[0.0] * k for _ in range(k)]
    for x, y in zip(a, b, strict=True):
        observed[level(x) - 1][level(y) - 1] += 1
    n = len(a)
    rows = [sum(r) for r in observed]
    cols = [sum(observed[i][j] for i in range(k)) for j in range(k)]
    weight = [[(i - j) ** 2 / (k - 1) ** 2 for j in range(k)] for i in range(k)]
    num = math.fsum(weight[i][j] * observed[i][j] for i in range(k) for j in range(k))
    den = math.fsum(weight[i][j] * rows[i] * cols[j] / n for i in range(k) for j in range(k))
    if den == 0:
        return None
    return 1 - num / den


def mean_bias(panel: Sequence[float], human: Sequence[float]) -> float | None:
    """Mean of (panel − human): positive when the panel is more generous than people."""
    if not panel:
        return None
    return statistics.fmean(p - h for p, h in zip(panel, human, strict=True))


def linear_fit(panel: Sequence[float], human: Sequence[float]) -> tuple[float, float] | None:
    """(scale, bias) minimising Σ (scale·panel + bias − human)²; None when the panel scores are all equal."""
    if len(panel) < 2:
        return None
    mx, my = statistics.fmean(panel), statistics.fmean(human)
    sxx = math.fsum((x - mx) ** 2 for x in panel)
    if sxx == 0:
        return None
    scale = math.fsum((x - mx) * (y - my) for x, y in zip(panel, human, strict=True)) / sxx
    return scale, my - scale * mx


@dataclass(frozen=True)
class Calibration:
    """``calibrated = clamp(scale · raw + bias, 1, 5)``, and the rule that decides (:mod:`polpo.review.rule`)."""

    scale: float = 1.0
    bias: float = 0.0
    source: str = ""
    rule: Rule | None = None
    """Pass, fail or ask a person, on the raw score (None: the threshold decides, as without calibration)."""

    def apply(self, raw: float) -> float:
        return round(min(SCORE_MAX, max(SCORE_MIN, self.scale * raw + self.bias)), 6)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"scale": self.scale, "bias": self.bias, "source": self.source}
        if self.rule is not None:
            out["rule"] = self.rule.to_json()
        return out


def load_calibration(path: Path) -> Calibration:
    """Read a calibration file (a linear map, a rule, or both); ValueError with the reason when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read a calibration: {exc}") from None
    if not isinstance(data, dict):
        data = {}
    rule = None
    if isinstance(data.get("rule"), dict):
        try:
            rule = Rule.from_json(data["rule"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f'{path}: its "rule" is not one ({exc}): make it again with polpo calibrate --write') \
                from None
    scale, bias = data.get("scale", 1.0 if rule else None), data.get("bias", 0.0 if rule else None)
    if not (_number(scale) and _number(bias)) or scale <= 0:
        raise ValueError(f'{path}: a calibration is {{"scale": a positive number, "bias": a number}}, a "rule", '
                         "or both (polpo calibrate --write makes one)")
    return Calibration(float(scale), float(bias), str(path), rule)


def _number(v: object) -> TypeGuard[int | float]:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def calibrate_consensus(c: Consensus, cal: Calibration) -> Consensus:
    """The consensus with every dimension's score calibrated (the raw one kept) and the verdict taken again
    (a critical dimension's cap applies to the calibrated scores as to raw ones)."""
    scores = [replace(s, score=cal.apply(s.score), raw_score=s.score) for s in c.scores]
    global_score = weighted_score([(s.score, s.weight) for s in scores])
    if c.capped_by:
        global_score = min(global_score, *(s.score for s in scores if s.dimension in c.capped_by))
    passed = bool(scores) and not c.unscored and global_score >= c.threshold
    return replace(c, scores=scores, global_score=global_score, passed=passed)
