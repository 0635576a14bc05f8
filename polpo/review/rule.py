"""Verdicts that know their limits: a rule, fitted on labelled work, that passes, fails, or asks a person. Pure.

A threshold on the panel's score passes everything above it, however unsure the panel is. Measured on
Qwen2.5-Coder-1.5B, every subtly broken function scored at or above the default 3.0. The rule replaces the one
threshold with two, chosen on labels people confirmed (``polpo calibrate --write``):

* ``pass_at``: the lowest score at which the labelled broken work that would pass without a person is at most
  ``max_false_pass`` of all the broken work (``[judge] max_false_pass``, 0.05 by default);
* ``fail_below``: the highest score under which the labelled good work that would fail is at most
  ``max_false_fail`` of all the good work;
* between them the panel cannot tell, and the task waits for a person (``awaiting_review``) — as it also does,
  whatever the score, when polpo's own evidence contradicts a passing score (a check, a stated example or a file
  that failed while the panel says pass), or when the panel's reviewers disagree by more than
  :data:`MAX_DISAGREEMENT` points;
* a **dispute** — the one thing against the work is the judge's own code disagreeing with it (a probe, or the
  programs a text answer was checked with) — fails when the panel's score before that evidence bounded it
  already fails. Otherwise it is a person's (``disputes = "person"``), unless the labels show the judge's code
  right often enough that failing every dispute keeps the false fails within ``max_false_fail``
  (``disputes = "fail"``). The judge's code is written by the judge's model from the task, and can be the one in
  error: measured on Qwen2.5-Coder-1.5B over the holdout and blind sets, 3 of 9 disputes were correct work the
  judge's own implementation got wrong. A person settles one in seconds from the input and the two answers;
  failing it sends correct work to be "fixed" against a wrong reference;
* a failing score that polpo's evidence contradicts the other way — every stated example passed and the judge's
  own implementation agreed with the work on every probe — is a person's too, as a passing score the evidence
  contradicts is. Measured on Qwen2.5-Coder-1.5B: `how_many_times` (correct, 3 of 3 examples, every probe
  agreeing) scored 1.47 from a reviewer that misread the task.

The rule is fitted on what it will decide: items it would send to a person do not count as false passes. Its
false-pass rate on the labels comes with a one-sided 95 % Clopper–Pearson upper bound (few labels make a wide
bound, and the report says so). Each person's verdict becomes a label, so the next fit has more.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["MAX_DISAGREEMENT", "Decision", "Disputes", "Features", "Rule", "RuleReport", "apply_rule", "clopper_pearson_upper",
           "fit_rule", "labels_needed", "no_rule_reason", "report_rule"]

MAX_DISAGREEMENT = 1.5
Decision = Literal["pass", "fail", "person"]
Disputes = Literal["person", "fail"]


@dataclass(frozen=True)
class Features:
    """What the rule looks at in one review."""

    score: float
    """The panel's raw global score (before any linear calibration)."""
    contradicted: bool = False
    """polpo's evidence shows a failure (a check, a stated example, a file that does not load)."""
    disagreement: float = 0.0
    """The range of the seats' own scores (0 with one seat)."""
    disputed: float | None = None
    """Set only for a dispute (the one evidence against the work is the judge's own code): the panel's raw score
    before that evidence bounded it."""
    supported: bool = False
    """Everything polpo ran passed: every stated example, and the judge's own code on every probe."""


@dataclass(frozen=True)
class Rule:
    pass_at: float
    fail_below: float
    max_false_pass: float
    max_false_fail: float
    max_disagreement: float = MAX_DISAGREEMENT
    disputes: Disputes = "person"
    """What a dispute the panel does not fail on its own score gets: ``person``, or ``fail`` when the labels
    showed the judge's own code right often enough (a rule file without it: ``person``)."""

    def to_json(self) -> dict[str, Any]:
        return {"passAt": self.pass_at, "failBelow": self.fail_below, "maxFalsePass": self.max_false_pass,
                "maxFalseFail": self.max_false_fail, "maxDisagreement": self.max_disagreement,
                "disputes": self.disputes}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Rule:
        pass_at, fail_below = float(data["passAt"]), float(data["failBelow"])
        if not (math.isfinite(pass_at) and math.isfinite(fail_below)) or fail_below > pass_at:
            raise ValueError("a rule needs failBelow ≤ passAt (finite numbers)")
        disputes = data.get("disputes", "person")
        if disputes != "person" and disputes != "fail":
            raise ValueError(f'a rule\'s disputes must be "person" or "fail", not {disputes!r}')
        return cls(pass_at, fail_below, float(data.get("maxFalsePass", 0.05)), float(data.get("maxFalseFail", 0.2)),
                   float(data.get("maxDisagreement", MAX_DISAGREEMENT)), disputes)


def apply_rule(rule: Rule, f: Features) -> tuple[Decision, str]:
    """The decision on one review, and why (for the person, when it is theirs)."""
    decision, _, why = _decide(rule, f)
    return decision, why


_Ground = Literal["disagreement", "dispute", "contradicted", "supported", "score"]
"""Which of the review's features decided it: :func:`report_rule` counts the persons asked for each."""


def _decide(rule: Rule, f: Features) -> tuple[Decision, _Ground, str]:
    if f.disagreement > rule.max_disagreement:
        return "person", "disagreement", (f"the reviewers disagree by {f.disagreement:.1f} points (more than "
                                          f"{rule.max_disagreement:g})")
    if f.disputed is not None:
        if f.disputed < rule.fail_below:
            return "fail", "dispute", (f"score {f.disputed:.2f} < {rule.fail_below:.2f} even before the judge's own "
                                       "code disagreed with the work")
        if rule.disputes == "fail":
            return "fail", "dispute", ("the judge's own code disagrees with the work, and on the labels the rule was "
                                       "fitted to, failing such disputes stayed within the false-fail limit")
        return "person", "dispute", ("the work and the judge's own code disagree, and nothing the task states settles "
                                     "it: the judge's code may be the one in error (the panel's score without that "
                                     f"evidence: {f.disputed:.2f}); a person should look at the inputs and the two "
                                     "answers")
    if f.score >= rule.pass_at:
        if f.contradicted:
            return "person", "contradicted", (f"the panel passes it ({f.score:.2f}) but polpo's own evidence shows a "
                                              "failure; a person should look")
        return "pass", "score", (f"score {f.score:.2f} ≥ {rule.pass_at:.2f}, where the labels show broken work "
                                 "passing rarely")
    if f.score < rule.fail_below:
        if f.supported:
            return "person", "supported", (f"the panel fails it ({f.score:.2f}), but every stated example passed and "
                                           "the judge's own implementation agrees with the work on every probe; a "
                                           "person should look")
        return "fail", "score", (f"score {f.score:.2f} < {rule.fail_below:.2f}, where the labels show good work "
                                 "failing rarely")
    return "person", "score", (f"score {f.score:.2f} is between {rule.fail_below:.2f} and {rule.pass_at:.2f}, where "
                               "the labelled work the panel scored was both good and broken: the panel cannot tell")


def _cuts(values: Sequence[float]) -> list[float]:
    """Candidate thresholds: below everything, between neighbours (midpoints), above everything."""
    vs = sorted(set(values))
    if not vs:
        return [0.0]
    return [vs[0] - 1e-6, *((a + b) / 2 for a, b in itertools.pairwise(vs)), vs[-1] + 1e-6]


def no_rule_reason(items: Sequence[tuple[Features, bool]]) -> str | None:
    """Why labels cannot support a rule (a class with no example: its error rate cannot be measured), or None."""
    if not any(not good for _, good in items):
        return "the labels hold no broken work (every label is 3 or more): a false-pass rate cannot be measured"
    if not any(good for _, good in items):
        return "the labels hold no good work (every label is under 3): a false-fail rate cannot be measured"
    return None


def labels_needed(max_false_pass: float, confidence: float = 0.95) -> int:
    """How many broken items must be labelled, none of them passing, for the upper bound of the false-pass
    rate to reach ``max_false_pass`` (59 for 0.05, 29 for 0.1)."""
    return math.ceil(math.log(1 - confidence) / math.log1p(-max_false_pass))


def fit_rule(items: Sequence[tuple[Features, bool]], *, max_false_pass: float, max_false_fail: float,
             max_disagreement: float = MAX_DISAGREEMENT) -> Rule:
    """The rule for ``items`` (features, does a person pass it?): ``fail_below`` as high and ``pass_at`` as low
    as the false-fail and false-pass limits allow (but not under ``fail_below``), so as little as possible goes
    to a person; then disputes failed if the false fails that adds still fit the limit and the labels hold at
    least one dispute. The labels must hold both kinds of work (:func:`no_rule_reason`): ValueError otherwise."""
    if (why := no_rule_reason(items)) is not None:
        raise ValueError(why)
    decidable = [(f, good) for f, good in items if f.disagreement <= max_disagreement]
    bad = [f for f, good in decidable if not good]
    good = [f for f, g in decidable if g]
    n_bad, n_good = sum(1 for _, g in items if not g), sum(1 for _, g in items if g)
    cuts = _cuts([s for f, _ in decidable for s in {f.score, _fail_score(f)}])
    allowed_fp = math.floor(max_false_pass * n_bad + 1e-9)
    pass_at = next((c for c in cuts if sum(1 for f in bad if f.score >= c and not f.contradicted
                                           and f.disputed is None) <= allowed_fp), cuts[-1])
    allowed_ff = math.floor(max_false_fail * n_good + 1e-9)
    fail_below = next((c for c in reversed(cuts) if sum(1 for f in good if _fail_score(f) < c and not f.supported)
                       <= allowed_ff), cuts[0])
    # below fail_below, lowering pass_at only turns fails the labels allow into passes, and sends work the
    # evidence contradicts (capped below 2.5) to a person instead of failing it
    pass_at = max(pass_at, fail_below)
    false_fails = sum(1 for f in good if (_fail_score(f) < fail_below and not f.supported) or f.disputed is not None)
    disputes: Disputes = ("fail" if any(f.disputed is not None for f, _ in decidable) and false_fails <= allowed_ff
                          else "person")
    return Rule(round(pass_at, 6), round(fail_below, 6), max_false_pass, max_false_fail, max_disagreement, disputes)


def _fail_score(f: Features) -> float:
    """The score the rule fails on: a dispute fails only on the panel's score before it."""
    return f.disputed if f.disputed is not None else f.score


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(X ≤ k) for X ~ Binomial(n, p), summed in log space (``math.comb`` overflows a float past n ≈ 1000)."""
    if p <= 0:
        return 1.0
    if p >= 1:
        return 0.0 if k < n else 1.0
    lp, lq, lgn = math.log(p), math.log1p(-p), math.lgamma(n + 1)
    return math.fsum(math.exp(lgn - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq)
                     for i in range(k + 1))


def clopper_pearson_upper(k: int, n: int, confidence: float = 0.95) -> float | None:
    """The one-sided upper confidence bound of a rate seen ``k`` times in ``n`` (None when ``n`` is 0)."""
    if n == 0:
        return None
    if k >= n:
        return 1.0
    lo, hi = k / n, 1.0
    for _ in range(60):  # bisection: P(X ≤ k | n, p) = 1 − confidence
        mid = (lo + hi) / 2
        if _binom_cdf(k, n, mid) > 1 - confidence:
            lo = mid
        else:
            hi = mid
    return round(hi, 4)


@dataclass(frozen=True)
class RuleReport:
    """What the rule does on labelled items."""

    passed: int
    failed: int
    person: int
    false_pass: int
    """Broken items (by the label) the rule passes without a person."""
    false_fail: int
    bad: int
    good: int
    disputed: int = 0
    """Of the items sent to a person, those sent for a dispute (the judge's own code against the work)."""
    supported: int = 0
    """Of the items sent to a person, those the panel failed while everything polpo ran passed."""

    @property
    def false_pass_rate(self) -> float | None:
        return self.false_pass / self.bad if self.bad else None

    @property
    def accuracy(self) -> float | None:
        """Right decisions among the items the rule decided itself."""
        decided = self.passed + self.failed
        return (decided - self.false_pass - self.false_fail) / decided if decided else None

    def to_json(self) -> dict[str, Any]:
        rate = self.false_pass_rate
        return {"passed": self.passed, "failed": self.failed, "person": self.person, "falsePass": self.false_pass,
                "falseFail": self.false_fail, "broken": self.bad, "good": self.good, "disputed": self.disputed, "supported": self.supported,
                "falsePassRate": None if rate is None else round(rate, 4),
                "falsePassUpper95": clopper_pearson_upper(self.false_pass, self.bad),
                "accuracy": None if self.accuracy is None else round(self.accuracy, 4)}


def report_rule(rule: Rule, items: Sequence[tuple[Features, bool]]) -> RuleReport:
    decided = [(_decide(rule, f)[:2], good) for f, good in items]
    asked = [ground for (d, ground), _ in decided if d == "person"]
    return RuleReport(passed=sum(d == "pass" for (d, _), _ in decided), failed=sum(d == "fail" for (d, _), _ in decided),
                      person=len(asked), false_pass=sum(d == "pass" and not g for (d, _), g in decided),
                      false_fail=sum(d == "fail" and g for (d, _), g in decided),
                      bad=sum(not g for _, g in items), good=sum(g for _, g in items),
                      disputed=asked.count("dispute"), supported=asked.count("supported"))
