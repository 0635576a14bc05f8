"""What the evidence allows the score to be, whatever the reviewers believe. Pure.

Measured on Qwen2.5-Coder-1.5B: shown that `is_prime(6)` returned True where the task says False, the reviewer
still wrote "passes all the stated examples" and scored 5. A small model reads evidence and does not weigh it.
So the facts polpo established bound the critical dimensions (or, with none marked critical, the global score):

* a stated example the work fails, or a file of the work that does not load: at most :data:`FAILED_CAP` (2) —
  the work does not do what its own task says;
* a probe where the work and the judge's own implementation (which passes every stated example) disagree, or a
  text answer that differs from what two programs of the judge's agree on (:mod:`polpo.review.answer_probe`):
  at most :data:`PROBE_CAP` (2.5) — the work is likely wrong, but the judge's code may be the one in error, so
  it weighs less. Such a bound is a *dispute*: with a calibrated rule, a person settles it
  (:mod:`polpo.review.rule`).

Below the default threshold either way, and the review says which items capped it. A cheap check that failed has
already failed the attempt before any review runs, so checks do not cap here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from polpo.review.answer_probe import ORIGIN as ANSWER_ORIGIN
from polpo.review.consensus import Consensus, WeightedDimension, capped_score
from polpo.review.evidence import Evidence

__all__ = ["FAILED_CAP", "PROBE_CAP", "EvidenceCap", "apply_cap", "evidence_cap"]

FAILED_CAP = 2.0
PROBE_CAP = 2.5


@dataclass(frozen=True)
class EvidenceCap:
    cap: float
    items: list[str]
    """The evidence items that set it."""
    why: str
    disputed: bool = False
    """The bound is the judge's own code against the work (nothing the task states): with a calibrated rule, a
    dispute is a person's to settle (:mod:`polpo.review.rule`)."""

    def to_json(self) -> dict[str, Any]:
        return {"cap": self.cap, "items": list(self.items), "why": self.why, "disputed": self.disputed}


def evidence_cap(evidence: Evidence) -> EvidenceCap | None:
    """The bound the evidence sets, or None when it sets none."""
    failed = [i for i in evidence.items if i.kind in ("example", "load") and i.passed is False]
    if failed:
        return EvidenceCap(FAILED_CAP, [i.id for i in failed],
                           "the work fails what its own task states (" + ", ".join(i.id for i in failed) + ")")
    differ = [i for i in evidence.items if i.kind == "probe" and i.passed is False]
    if differ:
        ids = ", ".join(i.id for i in differ)
        if all(i.origin == ANSWER_ORIGIN for i in differ):
            return EvidenceCap(PROBE_CAP, [i.id for i in differ], "the work's answer differs from the one two "
                               f"programs the judge wrote from the task agree on ({ids})", disputed=True)
        return EvidenceCap(PROBE_CAP, [i.id for i in differ],
                           f"the work disagrees with the judge's own implementation on inputs near the stated "
                           f"examples ({ids})", disputed=True)
    return None


def apply_cap(c: Consensus, cap: EvidenceCap, dims: Sequence[WeightedDimension]) -> Consensus:
    """``c`` with its critical dimensions (every dimension when none is critical) at most ``cap.cap``, and the
    verdict taken again."""
    critical = {d.name for d in dims if getattr(d, "critical", False)} or {d.name for d in dims}
    scores = [replace(s, score=min(s.score, cap.cap)) if s.dimension in critical else s for s in c.scores]
    global_score, below = capped_score(scores, dims, c.threshold)
    passed = bool(scores) and not c.unscored and global_score >= c.threshold
    return replace(c, scores=scores, global_score=global_score, passed=passed, capped_by=sorted({*c.capped_by, *below}))
