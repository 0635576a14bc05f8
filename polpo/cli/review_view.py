"""The review part of ``polpo show TASK``: each check (with its tier), and for an LLM review every dimension's
votes per reviewer, the outliers dropped and why, the stability verdict, cache use and cost.

Works on what :func:`polpo.store.read.assessments` returns (a check's stored summary under ``scores.review``).
The consensus score is printed with the reasoning of the reviewer the consensus took it from, and that reviewer's
own vote next to it, so a passing score never sits beside a failing reviewer's text without saying whose it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["assessment_lines"]

REASONING_CHARS = 240
JUDGE_CODE_LINES = 30  # of the judge's own code shown with a dispute
SEATS = 3  # seats of a panel stored before [judge] seats existed; run i of seat s has index i·seats + s


def _cut(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _num(v: Any, fmt: str = ".2f") -> str:
    return format(v, fmt) if isinstance(v, int | float) and not isinstance(v, bool) else "-"


def _vote(v: Mapping[str, Any]) -> str:
    s = f"r{v.get('reviewer')} {_num(v.get('score'), 'g')}"
    if v.get("uncited"):
        s += " (cites no evidence: counts half)"
    if v.get("samples"):
        s += " (samples " + ", ".join(_num(x, "g") for x in v["samples"]) + ")"
    if v.get("crashed"):
        s += " (crashed: counted as 1)"
    if not v.get("kept", True):
        s += f" DROPPED: {v.get('why') or 'an outlier'}"
    return s


def _dist(d: Mapping[str, Any]) -> str:
    """A probability-weighted score's distribution: ``P 1:.02 2:.10 3:.30 4:.50 5:.08``."""
    probs = (d.get("dist") or {}).get("probs") or {}
    return "P " + " ".join(f"{k}:{_num(v, '.2f').lstrip('0') or '0'}" for k, v in sorted(probs.items())) \
        if probs else ""


def _dimension(d: Mapping[str, Any], indent: str, seats: int) -> list[str]:
    votes = d.get("reviewerScores") or []
    raw = f" (raw {_num(d['rawScore'])})" if d.get("rawScore") is not None else ""
    lines = [f"{indent}{d.get('dimension')}: {_num(d.get('score'))}/5{raw} (weight {_num(d.get('weight'), 'g')}); "
             f"votes: " + " · ".join(_vote(v) for v in votes)]
    spread = d.get("spread") or {}
    if len(spread.get("votes") or []) > 1:
        lines.append(f"{indent}  spread: mean {_num(spread.get('mean'))}, median {_num(spread.get('median'), 'g')},"
                     f" σ {_num(spread.get('std'))} over {len(spread['votes'])} vote(s)")
    if (dist := _dist(d)):
        lines.append(f"{indent}  {dist} (the score is their weighted mean)")
    who = d.get("fromReviewer")
    if d.get("reasoning") and isinstance(who, int):
        seat = who % seats
        own = next((v.get("score") for v in votes if v.get("reviewer") == seat), None)
        run = f"reviewer {seat}" + (f" (run {who})" if who != seat else "")
        lines.append(f"{indent}  why, from {run} who voted {_num(own, 'g')}: {_cut(d['reasoning'], REASONING_CHARS)}")
    return lines


def _review(r: Mapping[str, Any], indent: str) -> list[str]:
    lines: list[str] = []
    head = []
    if r.get("stability"):
        runs = f", {round((r.get('passRate') or 0) * 100)}% of runs pass" if r.get("passRate") is not None else ""
        conf = f", confidence {_num(r.get('confidence'))}" if r.get("confidence") is not None else ""
        head.append(f"{r['stability']}{conf}{runs}")
    stored = r.get("seats")
    seats = stored if isinstance(stored, int) and stored >= 1 else SEATS
    if seats != SEATS:  # the default panel says nothing, as before seats could be set
        head.append("one reviewer (no consensus)" if seats == 1 else f"{seats} reviewers")
    head.append(f"samples {r.get('samples', 1)}" + (", extra round (near the threshold)" if r.get("extraRound")
                                                    else "") + (", re-run" if r.get("rerun") else ""))
    if r.get("reviewerError") == "fail":
        head.append("crashed reviewers vote 1")
    if r.get("calibration"):
        cal = r["calibration"]
        if (cal.get("scale"), cal.get("bias")) != (1.0, 0.0):
            head.append(f"calibrated (×{_num(cal.get('scale'), 'g')} {_num(cal.get('bias'), '+g')}; raw "
                        f"{_num(r.get('rawGlobalScore'))})")
        if cal.get("rule"):
            rule = cal["rule"]
            head.append(f"rule: pass at ≥ {_num(rule.get('passAt'))}, fail below {_num(rule.get('failBelow'))}, "
                        "a person between")
    source = r.get("scoreSource")
    if source:
        head.append({"probability": "scores weighted by the judge's token probabilities (G-Eval)",
                     "sampled": "scores as written (no token probabilities could be read for them)",
                     "mixed": "scores partly weighted by token probabilities"}.get(source, source))
    if r.get("copies"):
        head.append("its seats were copies of one reviewer (one model, temperature 0): their agreement is not a "
                    "second opinion")
    lines.append(f"{indent}panel: " + "; ".join(head))
    evidence = r.get("evidence") or {}
    if evidence.get("items"):
        lines.append(f"{indent}evidence polpo ran: {evidence.get('summary')}")
        for item in evidence["items"]:
            if item.get("passed") is False or item.get("kind") == "note":
                mark = "note" if item.get("passed") is None else "DIFFERS" if item.get("kind") == "probe" else "FAILED"
                lines.append(f"{indent}  {item.get('id')} [{mark}] {_cut(item.get('label'), 160)}"
                             + (f": {_cut(item.get('detail'), 200)}" if item.get("detail") else ""))
    if r.get("uncited"):
        lines.append(f"{indent}no reviewer cited evidence for: {', '.join(r['uncited'])} (those votes count half)")
    if cap := r.get("evidenceCap"):
        lines.append(f"{indent}score bounded at {_num(cap.get('cap'), 'g')} by the evidence: {cap.get('why')}")
        if cap.get("disputed"):
            lines.append(f"{indent}  a dispute: only the judge's own code is against the work, and it can be the one "
                         f"in error (the panel's score without it: {_num(r.get('disputedScore'), '.2f')})")
            lines.extend(_judge_code(r.get("probe") or {}, indent + "  "))
    if r.get("cappedBy"):
        lines.append(f"{indent}capped by critical dimension(s) below the threshold: {', '.join(r['cappedBy'])}")
    pair = r.get("pairwise")
    if pair:
        lines.append(f"{indent}side by side with attempt {pair.get('against')}: {pair.get('result')} (asked in both "
                     f"orders: {pair.get('previousFirst') or '-'} / {pair.get('previousSecond') or '-'})")
    if r.get("decision") == "person":
        lines.append(f"{indent}a person must decide: {r.get('decisionReason')}")
    cache = r.get("cache") or {}
    cost = f"cost ${r['cost']:.4f}" if isinstance(r.get("cost"), int | float) else "cost unknown"
    lines.append(f"{indent}judge calls: {cache.get('hits', 0)} cache hit(s), {cache.get('misses', 0)} miss(es); "
                 f"{cost}, {r.get('tokens') or 0} tokens")
    for d in r.get("scores") or []:
        lines.extend(_dimension(d, indent, seats))
    if r.get("unscored"):
        lines.append(f"{indent}not scored by any reviewer: {', '.join(r['unscored'])}")
    return lines


def _judge_code(probe: Mapping[str, Any], indent: str) -> list[str]:
    """The code the judge wrote and compared the work with, for the person who settles a dispute."""
    code = str(probe.get("code") or "").rstrip().splitlines()
    if not code:
        return []
    shown = code[:JUDGE_CODE_LINES]
    more = [f"{indent}  … {len(code) - len(shown)} more line(s) in the review (polpo show --json)"] \
        if len(code) > len(shown) else []
    return [f"{indent}the judge's own {probe.get('function') or 'code'}:", *(f"{indent}  | {ln}" for ln in shown),
            *more]


def _reviewer(r: Mapping[str, Any], indent: str, said: set[str]) -> str:
    if r.get("ok"):
        status = f"score {_num(r.get('globalScore'))} via {r.get('strategy')}"
    else:  # a budget or an outage stops every reviewer with the same sentence: it is said once
        status = "failed: the same" if str(r.get("error")) in said else f"failed: {r.get('error')}"
        said.add(str(r.get("error")))
    cached = f"; {r['cacheHits']} cached answer(s)" if r.get("cacheHits") else ""
    return (f"{indent}reviewer {r.get('reviewer')} ({r.get('model')}): {status}; "
            f"read {len(r.get('filesRead') or [])} file(s){cached}")


def _failed_try(asm: Mapping[str, Any], check: Mapping[str, Any], indent: str, said: set[str]) -> list[str]:
    """What each reviewer of a review that ended in an error did (its traces are kept apart from a verdict's): the
    person looking at a task on hold sees which reviewer failed and how, not only the check's message."""
    failed = [r for r in asm.get("failedReviews") or [] if r.get("check") == check.get("idx")]
    if not failed:
        return []
    return [f"{indent}the reviewers of this try:", *(_reviewer(r, indent + "  ", said) for r in failed)]


def assessment_lines(asm: Mapping[str, Any], *, tiers: bool, indent: str = "    ") -> list[str]:
    """The lines of one stored assessment: its checks, reviews and verdict."""
    lines: list[str] = []
    if asm.get("trigger") == "judge":
        lines.append(f"{indent}re-assessed after the expectation judge's correction:")
    reviews: Sequence[Mapping[str, Any]] = asm.get("reviews") or []
    said: set[str] = set()  # what was printed already: a sentence repeated by every reviewer is said once
    for c in asm.get("checks") or []:
        extra = c.get("scores") or {}
        mark = "ERROR" if extra.get("error") else "PERSON" if extra.get("undecided") else \
            "pass" if c.get("passed") else "FAIL"
        tier = f"[tier {extra['tier']}] " if tiers and extra.get("tier") else ""
        lines.append(f"{indent}[{mark}] {tier}{c.get('type')} {c.get('label')}: {c.get('message')}")
        said.add(str(c.get("message")))
        if extra.get("review"):
            lines.extend(_review(extra["review"], indent + "  "))
        if person := extra.get("person"):  # the judge could not tell; a person decided
            lines.append(f"{indent}  decided by {person.get('by')}, a person: {'pass' if person.get('passed') else 'fail'}"
                         f" — {_cut(person.get('reason') or '', 200)} (the panel scored {_num(person.get('panelScore'))}"
                         f"; it could not tell: {_cut(person.get('why') or '', 200)})")
        lines.extend(_reviewer(r, indent + "  ", said) for r in reviews if r.get("check") == c.get("idx"))
        if extra.get("error"):  # a review that could not be done: what each of its reviewers did
            lines.extend(_failed_try(asm, c, indent + "  ", said))
    message = str(asm.get("message"))
    why = "as above" if message in said else message
    if asm.get("status") == "complete":
        lines.append(f"{indent}verdict: {'passed' if asm.get('passed') else 'failed'} — {why}")
    elif asm.get("message"):
        lines.append(f"{indent}verdict: {why}")
    return lines
