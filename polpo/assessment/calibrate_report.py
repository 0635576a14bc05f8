"""What ``polpo calibrate`` reports: how well the panel agrees with people, and what a rule would do. Pure.

For the panel and for each reviewer alone: Spearman's ρ, quadratic-weighted Cohen's κ
(:mod:`polpo.review.calibration`) and the mean bias; the panel against the single reviewers; the least-squares
line ``human ≈ scale · panel + bias``; and, for a rule (the config's, or the one ``--write`` fits with
``[judge] max_false_pass`` / ``max_false_fail``), how many items it passes, fails and sends to a person, its
false passes with their 95 % upper bound, and its accuracy on the items it decides. A person passes an item whose
label is at or above :data:`~polpo.assessment.calibrate.HUMAN_PASS` (3).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from polpo.assessment.calibrate import HUMAN_PASS, ItemResult
from polpo.review.calibration import linear_fit, mean_bias, spearman, weighted_kappa
from polpo.review.rule import Features, Rule, fit_rule, labels_needed, no_rule_reason, report_rule

__all__ = ["Agreement", "agreement", "fit", "no_fit_reason", "render", "report"]


@dataclass(frozen=True)
class Agreement:
    n: int
    spearman: float | None
    kappa: float | None
    bias: float | None

    def to_json(self) -> dict[str, Any]:
        r = _round
        return {"n": self.n, "spearman": r(self.spearman), "kappa": r(self.kappa), "bias": r(self.bias)}


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 6)


def agreement(pred: Sequence[float], human: Sequence[float]) -> Agreement:
    return Agreement(len(pred), spearman(pred, human), weighted_kappa(pred, human), mean_bias(pred, human))


def _labelled(results: Sequence[ItemResult]) -> list[tuple[Features, bool]]:
    return [(f, r.human >= HUMAN_PASS) for r in results if (f := r.features) is not None]


def fit(results: Sequence[ItemResult], *, max_false_pass: float, max_false_fail: float) -> tuple[Rule | None, str]:
    """The rule the labels support, or None with the reason (nothing scored, or one kind of work missing)."""
    items = _labelled(results)
    if not items:
        return None, "no item was scored"
    if (why := no_rule_reason(items)) is not None:
        return None, why
    return fit_rule(items, max_false_pass=max_false_pass, max_false_fail=max_false_fail), ""


def report(results: Sequence[ItemResult], rule: Rule | None = None, *, fitted: bool = False) -> dict[str, Any]:
    """Agreement of the panel and of each reviewer with people, the comparison, the linear calibration, and what
    ``rule`` decides on these items (``fitted``: the rule was fitted to these very labels, so its counts here are
    in-sample, not a measure on unseen work)."""
    scored = [r for r in results if r.panel is not None]
    panel = agreement([r.panel for r in scored if r.panel is not None], [r.human for r in scored])
    seats = sorted({s for r in scored for s in r.seats})
    reviewers = {s: agreement([r.seats[s] for r in scored if s in r.seats],
                              [r.human for r in scored if s in r.seats]) for s in seats}
    kappas = [a.kappa for a in reviewers.values() if a.kappa is not None]
    rhos = [a.spearman for a in reviewers.values() if a.spearman is not None]
    line = linear_fit([r.panel for r in scored if r.panel is not None], [r.human for r in scored])
    return {
        "items": len(results), "scored": len(scored),
        "failed": [{"id": r.id, "error": r.error} for r in results if r.panel is None],
        "panel": panel.to_json(), "reviewers": {str(s): a.to_json() for s, a in reviewers.items()},
        "single": {"meanKappa": _round(statistics.fmean(kappas)) if kappas else None,
                   "bestKappa": _round(max(kappas)) if kappas else None,
                   "meanSpearman": _round(statistics.fmean(rhos)) if rhos else None,
                   "bestSpearman": _round(max(rhos)) if rhos else None},
        "calibration": {"scale": _round(line[0]), "bias": _round(line[1])} if line else None,
        "rule": {**rule.to_json(), "onLabels": report_rule(rule, _labelled(results)).to_json(),
                 "fittedToTheseLabels": fitted} if rule else None,
        "copies": sum(r.copies for r in scored),
        "sources": {k: sum(r.source == k for r in scored) for k in ("probability", "sampled", "mixed")},
        "contradicted": sum(r.contradicted for r in scored),
        "results": [r.to_json() for r in results],
    }


def no_fit_reason(rep: Mapping[str, Any]) -> str:
    """Why a report has no linear calibration, in words (the real reason, not a guess)."""
    if rep["scored"] == 0:
        first = rep["failed"][0]["error"] if rep["failed"] else "no item"
        return f"no item could be scored; the first error: {first}"
    if rep["scored"] < 2:
        return "only one item was scored: a line needs two"
    return "the panel gave every item the same score"


def _fmt(v: float | None, signed: bool = False) -> str:
    return "n/a" if v is None else (f"{v:+.3f}" if signed else f"{v:.3f}")


def render(rep: dict[str, Any], *, source: str, judges: Sequence[str]) -> str:
    lines = [f"calibration: {rep['scored']}/{rep['items']} labelled item(s) of {source} scored by "
             f"{len(judges)} reviewer(s) ({', '.join(judges)})",
             f"{'':<12} {'n':>3} {'spearman':>9} {'kappa(qw)':>10} {'bias':>7}"]

    def row(name: str, a: dict[str, Any]) -> str:
        return (f"{name:<12} {a['n']:>3} {_fmt(a['spearman']):>9} {_fmt(a['kappa']):>10} "
                f"{_fmt(a['bias'], True):>7}")
    lines.append(row("panel", rep["panel"]))
    for seat, a in rep["reviewers"].items():
        lines.append(row(f"reviewer {seat}", a))
    single = rep["single"]
    lines.append(f"panel vs a single reviewer: kappa {_fmt(rep['panel']['kappa'])} vs {_fmt(single['meanKappa'])} "
                 f"mean ({_fmt(single['bestKappa'])} best); spearman {_fmt(rep['panel']['spearman'])} vs "
                 f"{_fmt(single['meanSpearman'])} mean ({_fmt(single['bestSpearman'])} best)")
    cal = rep["calibration"]
    lines.append("linear calibration: " + (f"human ≈ {cal['scale']:.4g} · panel {cal['bias']:+.4g}"
                                           if cal else f"n/a ({no_fit_reason(rep)})"))
    src = rep["sources"]
    lines.append(f"scores read from token probabilities on {src['probability']} item(s), as sampled on "
                 f"{src['sampled']}, mixed on {src['mixed']}; polpo's own evidence showed a failure on "
                 f"{rep['contradicted']}")
    if rep["copies"]:
        lines.append(f"note: on {rep['copies']} item(s) the seats were copies of one reviewer (one model, "
                     "temperature 0, the same angle): their agreement is not a second opinion; set [judge] "
                     "diversity = true or give the seats different models")
    if rep["rule"]:
        rule, on = rep["rule"], rep["rule"]["onLabels"]
        bound = "n/a" if on["falsePassUpper95"] is None else f"{on['falsePassUpper95']:.2f}"
        lines.append(f"rule: pass at ≥ {rule['passAt']:.3f}, fail below {rule['failBelow']:.3f}, a person "
                     f"between (max false pass {rule['maxFalsePass']:g}, max false fail {rule['maxFalseFail']:g}); "
                     + ("disputes fail" if rule.get("disputes") == "fail" else "disputes go to a person"))
        lines.append(f"  on these labels: {on['passed']} passed, {on['failed']} failed, {on['person']} sent to a "
                     f"person; false passes {on['falsePass']}/{on['broken']} broken (95% upper bound {bound}), "
                     f"false fails {on['falseFail']}/{on['good']} good; accuracy on decided items "
                     f"{_fmt(on['accuracy'])}")
        if on.get("disputed"):
            lines.append(f"  {on['disputed']} of the items sent to a person were disputes: only the judge's own code "
                         "was against the work")
        if on.get("supported"):
            lines.append(f"  {on['supported']} of the items sent to a person were failed by the panel while everything "
                         "polpo ran passed")
        lines.append("  " + ("counted on the labels the rule was fitted to: an in-sample estimate; run it with "
                             "--rule on labels it has not seen to measure it" if rule["fittedToTheseLabels"] else
                             "counted on labels the rule was not fitted to: a measure on unseen work"))
        need = labels_needed(rule["maxFalsePass"])
        if on["broken"] < need:
            lines.append(f"  note: {on['broken']} broken item(s) cannot show a false-pass rate under "
                         f"{rule['maxFalsePass']:g} with 95% confidence (that takes {need} with none passing): "
                         "label more broken work")
    for f in rep["failed"]:
        lines.append(f"not scored: {f['id']}: {f['error']}")
    return "\n".join(lines)
