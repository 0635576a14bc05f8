"""What one reviewer did (:class:`ReviewerTrace`), stored with its assessment and shown by `polpo show`, the web
view and the traces; JSON with camelCase keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from polpo.review.consensus import DimScore

__all__ = ["Mode", "ReviewerTrace"]

Mode = Literal["files", "output"]


@dataclass
class ReviewerTrace:
    """Everything one reviewer did, JSON-able via :meth:`to_json` (camelCase keys)."""

    index: int
    model: str
    ok: bool = False
    mode: Mode = "files"
    analysis: str = ""
    files_read: list[str] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    scores: list[DimScore] = field(default_factory=list)
    summary: str = ""
    suggestions: list[str] = field(default_factory=list)
    strategy: str | None = None
    strategy_errors: list[str] = field(default_factory=list)
    ignored_dimensions: list[str] = field(default_factory=list)
    error: str | None = None
    error_kind: str | None = None
    """An LLM error kind, ``invalid`` (answers but no valid scores), ``time_limit`` (``runaway`` once the server
    had answered), or ``internal``."""
    tokens: int = 0
    cost: float | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    duration: float = 0.0
    turns: int = 0
    """Phase 1 model calls."""
    global_score: float | None = None
    """This reviewer's own weighted score (for display; the verdict uses the consensus)."""
    score_source: str | None = None
    """``probability`` (every score the probability-weighted mean of its token's distribution), ``sampled``
    (the values written: the provider gave no log-probabilities), or ``mixed``."""
    evidence_asked: bool = False
    """Some scores cited no evidence, and the reviewer was asked once for it."""
    uncited: list[str] = field(default_factory=list)
    """Dimensions whose score still cites no evidence (they weigh less in the consensus)."""
    checklist: list[dict[str, Any]] = field(default_factory=list)
    """The checklist's answers: ``{question, dimension, answer, pYes}``."""
    seat: dict[str, Any] = field(default_factory=dict)
    """How this seat differed from the others: ``{framing, temperature, seed, order}``."""

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index, "model": self.model, "ok": self.ok, "mode": self.mode,
            "analysis": self.analysis, "filesRead": list(self.files_read), "messages": list(self.messages),
            "scores": [s.to_json() for s in self.scores], "summary": self.summary,
            "suggestions": list(self.suggestions), "strategy": self.strategy,
            "strategyErrors": list(self.strategy_errors), "ignoredDimensions": list(self.ignored_dimensions),
            "error": self.error, "errorKind": self.error_kind, "tokens": self.tokens, "cost": self.cost,
            "tokensIn": self.tokens_in, "tokensOut": self.tokens_out, "cacheHits": self.cache_hits,
            "cacheMisses": self.cache_misses, "duration": round(self.duration, 3),
            "turns": self.turns, "globalScore": self.global_score, "scoreSource": self.score_source,
            "evidenceAsked": self.evidence_asked, "uncited": list(self.uncited), "checklist": list(self.checklist),
            "seat": dict(self.seat),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReviewerTrace:
        return cls(
            index=int(data["index"]), model=str(data["model"]), ok=bool(data.get("ok")),
            mode="output" if data.get("mode") == "output" else "files", analysis=str(data.get("analysis") or ""),
            files_read=list(data.get("filesRead") or []), messages=list(data.get("messages") or []),
            scores=[DimScore.from_json(s) for s in data.get("scores") or []],
            summary=str(data.get("summary") or ""), suggestions=list(data.get("suggestions") or []),
            strategy=data.get("strategy"), strategy_errors=list(data.get("strategyErrors") or []),
            ignored_dimensions=list(data.get("ignoredDimensions") or []), error=data.get("error"),
            error_kind=data.get("errorKind"), tokens=int(data.get("tokens") or 0), cost=data.get("cost"),
            tokens_in=int(data.get("tokensIn") or 0), tokens_out=int(data.get("tokensOut") or 0),
            cache_hits=int(data.get("cacheHits") or 0), cache_misses=int(data.get("cacheMisses") or 0),
            duration=float(data.get("duration") or 0.0), turns=int(data.get("turns") or 0),
            global_score=data.get("globalScore"), score_source=data.get("scoreSource"),
            evidence_asked=bool(data.get("evidenceAsked")), uncited=list(data.get("uncited") or []),
            checklist=list(data.get("checklist") or []), seat=dict(data.get("seat") or {}),
        )
