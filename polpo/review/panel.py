"""The review panel: its reviewers (``[judge] seats``, three by default) in parallel, median consensus, spread, pass/fail and feedback for the agent.

A reviewer that fails (provider error, no valid scores, timeout, a bug) never aborts the panel; what its seat
means is ``reviewer_error`` (see :mod:`~polpo.review.consensus`: it abstains, or votes 1). With ``samples`` > 1
every seat scores that many times (each run a fresh reviewer, all in parallel) and its vote per dimension is the
median of its samples. When no run of any seat succeeded, the whole panel runs once more (reviewer indices
continue: 3, 4, 5) — unless every reviewer was refused (a bad key, a bad or overflowing request: sending it
again unchanged gets the same answer); if that fails too the review could not be done: ``error`` is set and
``global_score`` is None. That is not a verdict on the work, so ``feedback`` stays empty and the check reports
it as an error, ``retryable`` (an outage to wait out) only when some reviewer failed for a transient reason
(rate limit, timeout, connection, 5xx, its time limit). Invalid output from every reviewer, or refusals, are
not waited out: the task goes on hold with the reason at once.

**Stability.** Each successful run has its own weighted score; the verdict is ``stable_pass`` when every run
and the consensus pass, ``stable_fail`` when none does, else ``flaky``. ``confidence`` is ``1 − σ/2`` (σ: the
population standard deviation of the runs' scores; 2 is the largest σ a 1..5 scale allows), None with one run.
**Uncertain band.** When the consensus lies within ``uncertain_band`` of the threshold, one more round (one
more run per seat, never from the cache) is added before the verdict.
**Calibration.** With a :class:`~polpo.review.calibration.Calibration`, every score is mapped through it (the raw
ones kept) before it is compared with the threshold.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import anyio

from polpo.llm.client import ChatClient, ModelSettings
from polpo.llm.failures import REQUEST_FAULTS
from polpo.llm.secrets import redact
from polpo.review.calibration import Calibration, calibrate_consensus
from polpo.review.consensus import Consensus, DimensionResult, Review, consensus, pstdev
from polpo.review.dimensions import Dim
from polpo.review.evidence import Evidence
from polpo.review.evidence_cap import EvidenceCap, apply_cap, evidence_cap
from polpo.review.feedback import cut, feedback_text, suggestions_of, summary_of
from polpo.review.panel_evidence import panel_evidence
from polpo.review.reviewer import DEFAULT_MAX_TURNS, ReviewContext, ReviewerTrace, Seat, run_reviewer
from polpo.review.rule import Decision, Features, apply_rule
from polpo.review.seats import SEAT_TEMPERATURE, SeatPlan, copies, plan_seats
from polpo.review.work_files import WorkFile, read_work_files

__all__ = ["PanelOptions", "PanelResult", "ReviewContext", "feedback_text", "run_panel", "seat_scores"]

REASONING_IN_DETAILS = 300
# the provider answered "no", or the evidence blames the request (polpo.llm.failures): trying again will not help
REFUSED = frozenset({"auth", "bad_request", *REQUEST_FAULTS})
TRANSIENT = frozenset({"rate_limit", "timeout", "connection", "server", "time_limit"})  # waiting may help
Stability = Literal["stable_pass", "flaky", "stable_fail"]


@dataclass(frozen=True)
class PanelOptions:
    samples: int = 1
    reviewer_error: Literal["abstain", "fail"] = "abstain"
    uncertain_band: float = 0.0
    calibration: Calibration | None = None
    max_turns: int = DEFAULT_MAX_TURNS
    """A reviewer's exploration turns (``[judge] max_turns``)."""
    diversity: bool = True
    """Seats after the first get their own angle, evidence order and sampling (:mod:`polpo.review.seats`)."""
    logprobs: bool = True
    """Ask for the score tokens' log-probabilities (G-Eval's probability-weighted scores)."""
    probes: bool = True
    """Probe the work against the judge's own implementation where the task states examples of calls."""


@dataclass
class PanelResult:
    passed: bool
    global_score: float | None
    """None when no reviewer succeeded."""
    threshold: float
    scores: list[DimensionResult]
    reviewers: list[ReviewerTrace]
    """Every reviewer run, failed ones, samples and extra rounds included, in index order."""
    single_reviewer: bool = False
    rerun: bool = False
    error: str | None = None
    retryable: bool = True
    feedback: str = ""
    """For the agent's fix attempt: the failed dimensions with scores, reasoning, evidence and suggestions."""
    summary: str = ""
    unscored: list[str] = field(default_factory=list)
    samples: int = 1
    extra_round: bool = False
    stability: Stability | None = None
    confidence: float | None = None
    pass_rate: float | None = None
    raw_global_score: float | None = None
    """Before calibration (None when none applies)."""
    options: PanelOptions = field(default_factory=PanelOptions)
    seats: int = 3
    """Reviewers per round (run ``i`` of the panel sat in seat ``i % seats``)."""
    evidence: Evidence = field(default_factory=Evidence)
    """What polpo established by running the work before the reviewers looked."""
    copies: bool = False
    """The seats were copies of one reviewer (one model, temperature 0, same angle): agreement proves nothing."""
    capped_by: list[str] = field(default_factory=list)
    evidence_cap: EvidenceCap | None = None
    """The bound the evidence set on the score (a failed stated example, a probe that differs), if any."""
    disputed_score: float | None = None
    """With a dispute (the bound is the judge's own code against the work), the panel's raw score before it."""
    probe: dict[str, Any] | None = None
    """The call that wrote the judge's own implementation for the probes, with its spend."""
    decision: Decision = "fail"
    """``pass``, ``fail``, or ``person``: the calibrated rule could not tell (:mod:`polpo.review.rule`)."""
    decision_reason: str = ""

    @property
    def tokens(self) -> int:
        probe = self.probe or {}
        return sum(r.tokens for r in self.reviewers) + int(probe.get("tokensIn") or 0) + \
            int(probe.get("tokensOut") or 0)

    @property
    def cost(self) -> float | None:
        costs = [r.cost for r in self.reviewers if r.cost is not None]
        if self.probe and self.probe.get("cost") is not None:
            costs.append(float(self.probe["cost"]))
        return math.fsum(costs) if costs else None

    @property
    def cache_hits(self) -> int:
        return sum(r.cache_hits for r in self.reviewers)

    @property
    def cache_misses(self) -> int:
        return sum(r.cache_misses for r in self.reviewers)

    @property
    def message(self) -> str:
        """One line for the check row and events."""
        if self.global_score is None:
            return f"Review could not be done: no reviewer produced valid scores ({len(self.reviewers)} tried)"
        verdict = "" if self.passed else " — below threshold"
        if self.decision == "person":
            verdict = " — a person must decide"
        elif self.options.calibration is not None and self.options.calibration.rule is not None:
            verdict = "" if self.passed else " — failed by the calibrated rule"
        single = " (a single reviewer succeeded)" if self.single_reviewer else ""
        head = f"Score {self.global_score:.2f}/5 (threshold {self.threshold:g}){verdict}{single}"
        if self.stability is not None and (self.samples > 1 or self.extra_round or self.stability == "flaky"):
            head += f"; {self.stability}"
        return head + (f": {self.summary[:100]}" if self.summary else "")

    @property
    def details(self) -> str:
        """Per-dimension lines for the check row."""
        if self.global_score is None:
            return self.error or ""
        lines = [f"Global score: {self.global_score:.2f}/5 (threshold: {self.threshold:g})"
                 + (f", raw {self.raw_global_score:.2f} before calibration" if self.raw_global_score is not None
                    else "")]
        for s in self.scores:
            votes = ", ".join(f"{v['score']:g}" + ("" if v["kept"] else " (outlier)")
                              + (" (crashed)" if v.get("crashed") else "") for v in s.reviewer_scores)
            lines.append(f"{s.dimension}: {s.score:g}/5 (weight: {s.weight:g}; votes: {votes}) — "
                         f"{cut(s.reasoning, REASONING_IN_DETAILS)}")
        if self.unscored:
            lines.append("Not scored by any reviewer: " + ", ".join(self.unscored))
        if self.summary:
            lines.append(f"Summary: {self.summary}")
        return "\n".join(lines)

    def review_json(self) -> dict[str, Any]:
        """What ``polpo show`` and metrics read without the traces: votes, outliers, spread, stability, cache."""
        return {
            "globalScore": self.global_score, "rawGlobalScore": self.raw_global_score, "threshold": self.threshold,
            "passed": self.passed, "scores": [s.to_json() for s in self.scores], "unscored": list(self.unscored),
            "seats": self.seats, "samples": self.samples, "extraRound": self.extra_round, "rerun": self.rerun,
            "stability": self.stability, "confidence": self.confidence, "passRate": self.pass_rate,
            "singleReviewer": self.single_reviewer, "reviewerError": self.options.reviewer_error,
            "calibration": self.options.calibration.to_json() if self.options.calibration else None,
            "cache": {"hits": self.cache_hits, "misses": self.cache_misses},
            "tokens": self.tokens, "cost": self.cost, "error": self.error,
            "evidence": self.evidence.to_json(), "copies": self.copies, "cappedBy": list(self.capped_by),
            "decision": self.decision, "decisionReason": self.decision_reason,
            "evidenceCap": self.evidence_cap.to_json() if self.evidence_cap else None,
            "disputedScore": self.disputed_score, "probe": self.probe,
            "scoreSource": _sources(self.reviewers), "uncited": _uncited(self.reviewers),
            "reviewers": [{"index": r.index, "model": r.model, "ok": r.ok, "globalScore": r.global_score,
                           "error": r.error, "errorKind": r.error_kind, "cacheHits": r.cache_hits,
                           "cost": r.cost, "scoreSource": r.score_source, "uncited": list(r.uncited),
                           "evidenceAsked": r.evidence_asked, "seat": r.seat} for r in self.reviewers],
        }

    def to_json(self) -> dict[str, Any]:
        return {**self.review_json(), "reviewers": [r.to_json() for r in self.reviewers],
                "feedback": self.feedback, "summary": self.summary, "retryable": self.retryable}


def _sources(traces: Sequence[ReviewerTrace]) -> str | None:
    """How the panel's scores were read: ``probability``, ``sampled`` or ``mixed`` (None: nobody scored)."""
    kinds = {t.score_source for t in traces if t.ok and t.score_source}
    return None if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"


def _uncited(traces: Sequence[ReviewerTrace]) -> list[str]:
    """Dimensions no successful reviewer backed with evidence."""
    ok = [t for t in traces if t.ok]
    if not ok:
        return []
    return sorted(set.intersection(*(set(t.uncited) for t in ok)))


ClientFor = Callable[[int], ChatClient]


@dataclass(frozen=True)
class _Setup:
    """What every run of one panel shares: the work's files as read, the evidence, each seat's plan, the
    options."""

    files: tuple[WorkFile, ...]
    evidence: Evidence
    plans: list[SeatPlan]
    logprobs: bool


async def _rounds(client_for: ClientFor, models: Sequence[ModelSettings], ctx: ReviewContext, dims: Sequence[Dim],
                  offset: int, rounds: int, max_turns: int, reviewer_timeout: float | None,
                  setup: _Setup) -> list[ReviewerTrace]:
    """``rounds`` runs of every seat, all at once; run ``r`` of seat ``i`` has index ``offset + r·n + i``."""
    n = len(models)
    traces: list[ReviewerTrace | None] = [None] * (n * rounds)

    async def one(slot: int) -> None:
        seat = slot % n
        settings = models[seat]
        index = offset + slot
        plan = setup.plans[seat]
        if index >= n:  # a seat's later samples, rounds and re-runs must not repeat its first run
            plan = replace(plan, seed=(plan.seed or 1000 + seat) + 100 * (index // n),
                           temperature=plan.temperature if plan.temperature is not None else
                           (SEAT_TEMPERATURE if settings.temperature == 0 else None))
        try:
            traces[slot] = await run_reviewer(client_for(seat), settings, index=index, ctx=ctx, dims=dims,
                                              max_turns=max_turns, time_limit=reviewer_timeout,
                                              seat=Seat(setup.files, setup.evidence, plan, setup.logprobs))
        except Exception as exc:  # run_reviewer does not raise; this keeps a future bug from killing the group
            traces[slot] = ReviewerTrace(index=index, model=settings.model, error_kind="internal",
                                         error=redact(f"internal error: {type(exc).__name__}: {exc}")[:2000])

    async with anyio.create_task_group() as tg:
        for slot in range(n * rounds):
            tg.start_soon(one, slot)
    return [t for t in traces if t is not None]


def _verdict(traces: list[ReviewerTrace], dims: Sequence[Dim], threshold: float, n: int,
             opts: PanelOptions, cap: EvidenceCap | None = None) -> Consensus | None:
    """The consensus, bounded by what the evidence allows (before and after any calibration: the bound is on
    the scale people read), calibrated."""
    ok = [t for t in traces if t.ok]
    seats_ok = {t.index % n for t in ok}
    c = consensus([Review(t.index, t.scores, voter=t.index % n) for t in ok], dims, threshold,
                  crashed=[s for s in range(n) if s not in seats_ok], fail_vote=opts.reviewer_error == "fail")
    if c is not None and cap is not None:
        c = apply_cap(c, cap, dims)
    if c is not None and opts.calibration is not None:
        c = calibrate_consensus(c, opts.calibration)
        if cap is not None:
            c = apply_cap(c, cap, dims)
    return c


def _stability(c: Consensus, ok: list[ReviewerTrace], opts: PanelOptions) -> tuple[Stability, float | None, float]:
    """(verdict over the runs and the consensus, confidence, share of runs that pass)."""
    cal = opts.calibration
    runs = [cal.apply(t.global_score) if cal else t.global_score for t in ok if t.global_score is not None]
    passing = [s >= c.threshold for s in runs]
    rate = sum(passing) / len(passing) if passing else (1.0 if c.passed else 0.0)
    verdict: Stability = ("stable_pass" if c.passed and all(passing) else
                          "stable_fail" if not c.passed and not any(passing) else "flaky")
    confidence = round(max(0.0, 1 - pstdev(runs) / 2), 3) if len(runs) >= 2 else None
    return verdict, confidence, round(rate, 3)


async def run_panel(client: ChatClient, models: Sequence[ModelSettings], ctx: ReviewContext, dims: Sequence[Dim],
                    threshold: float, *, max_turns: int | None = None, reviewer_timeout: float | None = None,
                    options: PanelOptions | None = None, client_for: ClientFor | None = None) -> PanelResult:
    """Run the panel (one seat per entry of ``models``, normally 3) and decide. Never raises on model errors.

    ``max_turns`` (default: the options') bounds each reviewer's exploration. With one seat there is no
    consensus to speak of: its reviewer's scores are the verdict, and it is not flagged ``single_reviewer``.

    ``reviewer_timeout`` bounds each reviewer's whole run in seconds (None: only the client's per-request
    timeout applies). ``client_for(seat)`` gives the client of a seat's first run when there is one sample (the
    judge-call cache); every other run — samples, the extra round, a re-run — uses ``client``.
    """
    if not models:
        raise ValueError("run_panel needs at least one reviewer model")
    opts = options or PanelOptions()
    if max_turns is None:
        max_turns = opts.max_turns
    dims = list(dims)
    n = len(models)
    files = read_work_files(ctx.workspace, ctx.files_changed)
    evidence, probe = await panel_evidence(ctx, files, client, models[0] if opts.probes else None)
    plans = plan_seats(models, len(evidence.items), diversity=opts.diversity)
    setup = _Setup(files, evidence, plans, opts.logprobs)
    same = copies(models, plans)
    plain: ClientFor = lambda _seat: client  # noqa: E731
    first = client_for if client_for is not None and opts.samples == 1 else plain
    traces = await _rounds(first, models, ctx, dims, 0, max(1, opts.samples), max_turns, reviewer_timeout, setup)
    rerun = False
    last = traces  # the latest round: whether waiting may help is judged on it
    if not any(t.ok for t in traces) and not {t.error_kind for t in traces} <= REFUSED:
        rerun = True
        last = await _rounds(plain, models, ctx, dims, len(traces), 1, max_turns, reviewer_timeout, setup)
        traces += last
    cap = evidence_cap(evidence)
    c = _verdict(traces, dims, threshold, n, opts, cap)
    extra = False
    if c is not None and opts.uncertain_band > 0 and abs(c.global_score - threshold) <= opts.uncertain_band:
        extra = True
        traces += await _rounds(plain, models, ctx, dims, len(traces), 1, max_turns, reviewer_timeout, setup)
        c = _verdict(traces, dims, threshold, n, opts, cap) or c
    if c is None:
        errors = "; ".join(f"reviewer {t.index} ({t.model}): {t.error or 'no result'}" for t in traces)
        kinds = {t.error_kind for t in last}
        head = ("all reviewers failed, twice" if rerun else
                "all reviewers failed (not re-run: the provider refused the request, or the request itself was "
                "at fault; sending it again unchanged would fail the same way)")
        return PanelResult(passed=False, global_score=None, threshold=threshold, scores=[], reviewers=traces,
                           rerun=rerun, error=f"{head}: {errors}", retryable=bool(kinds & TRANSIENT),
                           samples=opts.samples, options=opts, seats=n, evidence=evidence, copies=same,
                           probe=probe)
    ok = [t for t in traces if t.ok]
    summary = summary_of(c, ok)
    stability, confidence, rate = _stability(c, ok, opts)
    plain_opts = PanelOptions(reviewer_error=opts.reviewer_error)
    raw = _verdict(traces, dims, threshold, n, plain_opts, cap) if opts.calibration is not None else None
    free = _verdict(traces, dims, threshold, n, plain_opts, None) if cap is not None and cap.disputed else None
    disputed = free.global_score if free is not None else None
    decision, why = _decide(c, raw, ok, evidence, opts, n, disputed)
    # a person who fails an undecided review sends the agent the reviewers' feedback too
    feedback = "" if decision == "pass" else feedback_text(c, suggestions_of(ok), summary)
    return PanelResult(passed=decision == "pass", global_score=c.global_score, threshold=threshold, scores=c.scores,
                       reviewers=traces, single_reviewer=c.single_reviewer and n > 1, rerun=rerun, feedback=feedback,
                       summary=summary, unscored=c.unscored, samples=opts.samples, extra_round=extra,
                       stability=stability, confidence=confidence, pass_rate=rate,
                       raw_global_score=raw.global_score if raw is not None else None, options=opts, seats=n,
                       evidence=evidence, copies=same, capped_by=c.capped_by, decision=decision,
                       decision_reason=why, evidence_cap=cap, disputed_score=disputed, probe=probe)


def seat_scores(traces: Sequence[ReviewerTrace], seats: int) -> dict[int, float]:
    """Each seat's own global score (the median of its successful runs): what the seats' disagreement is
    measured on, by the rule here and by ``polpo calibrate`` that fits it."""
    runs: dict[int, list[float]] = {}
    for t in traces:
        if t.ok and t.global_score is not None:
            runs.setdefault(t.index % seats, []).append(t.global_score)
    return {seat: float(statistics.median(v)) for seat, v in sorted(runs.items())}


def _decide(c: Consensus, raw: Consensus | None, ok: list[ReviewerTrace], evidence: Evidence,
            opts: PanelOptions, seats: int, disputed: float | None) -> tuple[Decision, str]:
    """Pass or fail by the threshold, or, with a calibrated rule, pass, fail or a person (``disputed``: the raw
    score before a dispute bounded it)."""
    rule = opts.calibration.rule if opts.calibration is not None else None
    if rule is None or c.unscored:
        return ("pass" if c.passed else "fail"), ""
    own = list(seat_scores(ok, seats).values())
    score = raw.global_score if raw is not None else c.global_score
    return apply_rule(rule, Features(score, contradicted=bool(evidence.failed),
                                     disagreement=max(own) - min(own) if len(own) > 1 else 0.0, disputed=disputed,
                                     supported=evidence.supports_work))
