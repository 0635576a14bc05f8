"""``polpo calibrate``: run the review panel on a set labelled by people and measure how well it agrees.

The labels (:mod:`polpo.assessment.labels_read`) are read, and the panel runs with the config's judges, one item
at a time, uncalibrated (raw scores are what a calibration is fitted to), with everything a task's review has:
the evidence polpo gathers by running the work (and the item's own ``test`` command, as a check would), the
seats' diversity, log-probabilities where the provider gives them. Each item's result keeps what the rule needs
(:mod:`polpo.review.rule`): the raw score, whether polpo's evidence showed a failure, how far the seats were
apart. The report is :mod:`polpo.assessment.calibrate_report`'s.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from polpo.assessment.labels_read import MAX_FILES, LabelledItem, read_labels
from polpo.clock import SystemClock
from polpo.llm.client import ChatClient, ModelSettings
from polpo.review.evidence import CheckEvidence
from polpo.review.panel import PanelOptions, run_panel, seat_scores
from polpo.review.reviewer import ReviewContext
from polpo.review.rule import Features
from polpo.review.scratch import Scratch
from polpo.tools.commands import command_env
from polpo.tools.procs import run_process

__all__ = ["HUMAN_PASS", "ItemResult", "LabelledItem", "read_labels", "run_calibration"]

HUMAN_PASS = 3.0
"""A label at or above this is work a person passes (the default ``llm_review`` threshold)."""
TEST_TIMEOUT = 120.0


@dataclass
class ItemResult:
    id: str
    human: float
    panel: float | None
    seats: dict[int, float] = field(default_factory=dict)
    """Each reviewer's own weighted score (seat → score), for the per-reviewer agreement."""
    error: str | None = None
    contradicted: bool = False
    """polpo's own evidence showed a failure (a check, a stated example, a file that did not load)."""
    copies: bool = False
    """The panel's seats were copies of one reviewer."""
    source: str | None = None
    """How the scores were read: probability, sampled or mixed."""
    evidence: str = ""
    """The evidence's one-line summary."""
    review: dict[str, Any] = field(default_factory=dict, repr=False)
    """The panel's review and every reviewer's whole trace (kept only with ``polpo calibrate --traces``)."""
    disputed: float | None = None
    """With a dispute (only the judge's own code was against the work), the panel's score before it."""
    supported: bool = False
    """Everything polpo ran passed (every stated example, the judge's own code on every probe)."""

    @property
    def features(self) -> Features | None:
        if self.panel is None:
            return None
        own = list(self.seats.values())
        return Features(self.panel, self.contradicted, max(own) - min(own) if len(own) > 1 else 0.0, self.disputed,
                        self.supported)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "human": self.human, "panel": self.panel,
                "reviewers": {str(k): v for k, v in sorted(self.seats.items())}, "error": self.error,
                "contradicted": self.contradicted, "copies": self.copies, "source": self.source,
                "evidence": self.evidence, "disputed": self.disputed, "supported": self.supported}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ItemResult:
        return cls(str(data["id"]), float(data["human"]),
                   None if data.get("panel") is None else float(data["panel"]),
                   {int(k): float(v) for k, v in (data.get("reviewers") or {}).items()}, data.get("error"),
                   bool(data.get("contradicted")), bool(data.get("copies")), data.get("source"),
                   str(data.get("evidence") or ""),
                   disputed=None if data.get("disputed") is None else float(data["disputed"]),
                   supported=bool(data.get("supported")))


def _files(root: Path) -> list[str]:
    found = sorted(str(p.relative_to(root)) for p in root.rglob("*")
                   if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))
    return found[:MAX_FILES]


async def _test_check(item: LabelledItem) -> tuple[CheckEvidence, ...]:
    """The item's own ``test`` command, run in a copy of its work as a ``test`` check would be."""
    if item.test is None:
        return ()
    scratch = Scratch(item.workspace or Path("."), _files(item.workspace) if item.workspace else [],
                      None if item.workspace else item.output)
    try:
        root = await scratch.path()
        if root is None:
            return (CheckEvidence("test", item.test, False, f"could not be run: {scratch.problem}"),)
        proc = await run_process(["bash", "-c", item.test], cwd=root, env=command_env(), clock=SystemClock(),
                                 timeout=TEST_TIMEOUT)
    finally:
        scratch.close()
    state = "timed out" if proc.timed_out else proc.error or f"exit code {proc.exit_code}"
    return (CheckEvidence("test", item.test[-200:], proc.ok, state,
                          (proc.stdout_tail + proc.stderr_tail)[-2000:]),)


async def run_calibration(items: Sequence[LabelledItem], llm: ChatClient, judges: Sequence[ModelSettings], *,
                          options: PanelOptions | None = None, reviewer_timeout: float | None = None,
                          done: Mapping[str, ItemResult] | None = None,
                          on_item: Callable[[ItemResult, bool], None] | None = None,
                          on_start: Callable[[int, LabelledItem], None] | None = None) -> list[ItemResult]:
    """The panel's raw score and each reviewer's, per item (one item at a time; its reviewers in parallel).

    ``options``: the config's panel rules (any calibration is left out: raw scores are measured). ``done``:
    results of an earlier run, by item id, reused instead of run again; ``on_start(i, item)`` and
    ``on_item(result, reused)`` are called as each item starts and finishes (progress, results kept as they
    come)."""
    opts = replace(options or PanelOptions(), calibration=None, uncertain_band=0.0, samples=1)
    out: list[ItemResult] = []
    with tempfile.TemporaryDirectory(prefix="polpo-calibrate-") as empty:
        for i, item in enumerate(items):
            if done is not None and item.id in done:
                kept = replace(done[item.id], human=item.human)  # the label as it is now, if it was corrected
                out.append(kept)
                if on_item is not None:
                    on_item(kept, True)
                continue
            if on_start is not None:
                on_start(i, item)
            common: dict[str, Any] = {"title": item.title, "description": item.task, "criteria": item.criteria,
                                      "checks": await _test_check(item), "reference": item.reference,
                                      "anchors": tuple(item.anchors), "checklist": item.checklist}
            if item.workspace is not None:
                ctx = ReviewContext(workspace=item.workspace, files_changed=_files(item.workspace),
                                    timeline="(a labelled workspace: explore its files)", **common)
            else:
                ctx = ReviewContext(workspace=Path(empty), files_changed=[], output=item.output,
                                    timeline=f"Agent output:\n{item.output}", **common)
            result = await run_panel(llm, judges, ctx, item.dims, HUMAN_PASS, options=opts,
                                     reviewer_timeout=reviewer_timeout)
            seats = seat_scores(result.reviewers, len(judges))
            review = result.review_json()
            out.append(ItemResult(item.id, item.human, result.global_score, seats, result.error,
                                  bool(result.evidence.failed), result.copies, review.get("scoreSource"),
                                  result.evidence.summary(), result.to_json(), result.disputed_score,
                                  result.evidence.supports_work))
            if on_item is not None:
                on_item(out[-1], False)
    return out
