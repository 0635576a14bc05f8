"""The evidence a review rests on, as data and as the reviewers read it: numbered items (``E1``, ``E2``…) of what
running the work established (:mod:`polpo.review.evidence_run` gathers them), each a check, a stated example, a
file that failed to load, a probe of the judge's own, or a note of what could not be run and why. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from polpo.llm.secrets import redact

__all__ = ["KINDS", "CheckEvidence", "Evidence", "EvidenceItem", "Kind", "render_evidence"]

Kind = Literal["check", "example", "load", "probe", "note"]
KINDS: tuple[str, ...] = ("check", "example", "load", "probe", "note")


@dataclass(frozen=True)
class CheckEvidence:
    """A cheap check of the same assessment, as the reviewer is shown it."""

    type: str
    label: str
    passed: bool
    message: str
    output: str = ""


@dataclass(frozen=True)
class EvidenceItem:
    id: str
    kind: Kind
    label: str
    passed: bool | None
    """None for a note (something that could not be run, and why)."""
    detail: str = ""
    origin: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "label": self.label, "passed": self.passed,
                "detail": self.detail, "origin": self.origin}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EvidenceItem:
        kind = data.get("kind")
        return cls(str(data.get("id") or ""), kind if kind in KINDS else "note",
                   str(data.get("label") or ""), data.get("passed"), str(data.get("detail") or ""),
                   str(data.get("origin") or ""))


@dataclass
class Evidence:
    """What was established by running things, in the order it is shown."""

    items: list[EvidenceItem] = field(default_factory=list)

    def add(self, kind: Kind, label: str, passed: bool | None, detail: str = "", origin: str = "") -> None:
        self.items.append(EvidenceItem(f"E{len(self.items) + 1}", kind, redact(label), passed, redact(detail),
                                       origin))

    @property
    def examples(self) -> list[EvidenceItem]:
        return [i for i in self.items if i.kind == "example"]

    @property
    def failed(self) -> list[EvidenceItem]:
        """Checks, examples and files that failed: what the work demonstrably gets wrong."""
        return [i for i in self.items if i.passed is False]

    @property
    def supports_work(self) -> bool:
        """Everything polpo ran passed, and enough ran to say so: the task's stated examples, and the judge's own
        implementation agreeing with the work on every probe. A failing score then has the evidence against it."""
        return bool(self.examples) and not self.failed and any(i.kind == "probe" and i.passed for i in self.items)

    def summary(self) -> str:
        ex = self.examples
        parts = []
        if ex:
            bad = sum(1 for i in ex if not i.passed)
            parts.append(f"{len(ex) - bad} of {len(ex)} stated examples passed")
        checks = [i for i in self.items if i.kind == "check"]
        if checks:
            parts.append(f"{sum(1 for i in checks if i.passed)} of {len(checks)} checks passed")
        loads = [i for i in self.items if i.kind == "load"]
        if loads:
            parts.append(f"{len(loads)} file(s) failed to load")
        probes = [i for i in self.items if i.kind == "probe"]
        if probes:
            differ = [i.id for i in probes if i.passed is False]
            parts.append(f"the judge's own code differs from the work ({', '.join(differ)})" if differ
                         else "the judge's own code agrees with the work")
        return "; ".join(parts) or "no check ran and the task states no example to run"

    def to_json(self) -> dict[str, Any]:
        return {"summary": self.summary(), "items": [i.to_json() for i in self.items]}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Evidence:
        return cls([EvidenceItem.from_json(i) for i in (data or {}).get("items") or [] if isinstance(i, dict)])


def render_evidence(evidence: Evidence, order: Sequence[int] | None = None) -> str:
    """The evidence block of a reviewer's prompt (``order``: the items' positions, for a seat that sees them in
    another order)."""
    if not evidence.items:
        return "(polpo found nothing it could run: judge from the files and the output)"
    shown = [evidence.items[i] for i in order] if order is not None else evidence.items
    lines = []
    for item in shown:
        verdict = {True: "PASSED", False: "FAILED", None: "NOTE"}[item.passed] if item.kind != "probe" else \
            {True: "AGREES", False: "DIFFERS", None: "NOTE"}[item.passed]
        where = "" if not item.origin else f" ({item.origin})" if item.kind == "probe" else f" (stated in {item.origin})"
        lines.append(f"{item.id} [{verdict}] {item.label}{where}" + (f"\n    {item.detail}" if item.detail else ""))
    return "\n".join(lines) + f"\nIn short: {evidence.summary()}."
