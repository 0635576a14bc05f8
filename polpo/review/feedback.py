"""What the panel tells the agent when its work fell short, and the summary it shows: the low dimensions first,
with the reasons and evidence the reviewers gave, their suggestions once each. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from polpo.review.consensus import Consensus
from polpo.review.trace import ReviewerTrace

__all__ = ["MAX_SUGGESTIONS", "cut", "feedback_text", "suggestions_of", "summary_of"]

MAX_SUGGESTIONS = 8


def cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summary_of(c: Consensus, ok: list[ReviewerTrace]) -> str:
    """The summary of the reviewer whose own score is nearest the consensus (lowest index on a tie)."""
    used = [r for r in ok if r.index in c.reviewers and r.summary]
    if not used:
        return ""
    best = min(used, key=lambda r: (abs((r.global_score or 0.0) - c.global_score), r.index))
    return best.summary


def suggestions_of(ok: list[ReviewerTrace]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for r in ok:
        for s in r.suggestions:
            key = " ".join(s.lower().split())
            if key and key not in seen:
                seen.add(key)
                out.append(s.strip())
    return out[:MAX_SUGGESTIONS]


def feedback_text(c: Consensus, suggestions: Sequence[str], summary: str) -> str:
    """What the agent needs to raise the score: the dimensions below the threshold first, with the reasons."""
    lines = [f"The LLM review scored the work {c.global_score:.2f}/5; it needs {c.threshold:g} to pass."]
    low = sorted((s for s in c.scores if s.score < c.threshold), key=lambda s: (s.score, -s.weight))
    if low:
        lines.append(f"Dimensions below {c.threshold:g}:")
        for s in low:
            lines.append(f"- {s.dimension}: {s.score:g}/5 (weight {s.weight:g})")
            if s.reasoning:
                lines.append(f"  Why: {cut(s.reasoning, 1200)}")
            for e in s.evidence[:6]:
                where = str(e.get("file") or "")
                if where and e.get("line") is not None:
                    where += f":{e['line']}"
                note = str(e.get("note") or "")
                lines.append(f"  Evidence: {where + ' — ' if where else ''}{cut(note, 300)}")
    if c.unscored:
        lines.append("Not scored by any reviewer: " + ", ".join(c.unscored))
    if suggestions:
        lines.append("Suggestions:")
        lines.extend(f"- {cut(s, 400)}" for s in suggestions)
    if summary:
        lines.append(f"Reviewer summary: {cut(summary, 800)}")
    return "\n".join(lines)
