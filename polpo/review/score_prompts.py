"""Prompt texts of the reviewers' second phase: the scores, the ask for evidence, the checklist. Pure.

Shapes are written with ``<…>`` placeholders, never example values (see :mod:`polpo.review.prompts`). Each score's
reasoning comes before its number, as G-Eval's form-filling does: the model writes why, then the score that
follows from it, and the number is a single token whose alternatives :mod:`polpo.review.geval` can read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from polpo.review.prompts import head

__all__ = ["ANALYSIS_MAX", "CHECKLIST_SYSTEM", "SCORING_SYSTEM", "SUBMIT_REVIEW", "ask_evidence", "checklist_user",
           "finish_scoring", "retry_scoring", "score_shape", "scoring_user", "submit_review_tool"]

SUBMIT_REVIEW = "submit_review"
ANALYSIS_MAX = 12_000
EVIDENCE_MAX = 6_000

SCORING_SYSTEM = (
    "You are a code review scorer. You turn a reviewer's analysis and the evidence polpo gathered into G-Eval "
    "scores. Reply with one JSON object and nothing else: no prose, no code fence. Each score must follow from "
    "evidence you cite (an E-number, a file:line, or a command and its output); a FAILED evidence item is a "
    "defect of the work."
)


def score_shape(dim_names: Sequence[str]) -> str:
    """The JSON shape asked for, with placeholders only."""
    return ('{"scores": [{"dimension": <one of: ' + ", ".join(dim_names) + '>, "reasoning": <one or two '
            'sentences: what the evidence shows for this dimension, citing E-numbers or file:line>, "score": <a '
            'whole number from 1 to 5, following the rubric>}, <one object like it per dimension>], "summary": '
            '<one or two sentences on the whole result>, "suggestions": [<a concrete change that would raise a low '
            'score>]}')


def scoring_user(*, analysis: str, rubric: str, dim_names: Sequence[str], evidence: str = "",
                 anchors: str = "") -> str:
    anchor_block = f"SCORED EXAMPLES (how people scored similar work; score like them):\n{anchors}\n\n" \
        if anchors else ""
    return (
        f"REVIEWER'S ANALYSIS:\n{head(analysis, ANALYSIS_MAX)}\n\n"
        f"EVIDENCE:\n{head(evidence, EVIDENCE_MAX) or '(none)'}\n\n"
        f"EVALUATION DIMENSIONS:\n{rubric}\n\n{anchor_block}"
        f"Score each of these dimensions: {', '.join(dim_names)}. Reply with exactly this JSON shape (the <…> "
        f"parts are yours to fill):\n{score_shape(dim_names)}"
    )


def retry_scoring(error: str, dim_names: Sequence[str] = ()) -> str:
    """The repair turn. It names the expected dimensions, spelled as given: small models rename them
    (asked for ``correctness``, Qwen2.5-Coder-1.5B wrote ``functionality``)."""
    names = (f" The dimensions, exactly as spelled here and no others: {', '.join(dim_names)}."
             if dim_names else "")
    return (f"That answer was rejected: {error}\nAnswer again (call {SUBMIT_REVIEW} if it is offered) with every "
            f"dimension scored once, each score a whole number from 1 to 5.{names}")


def finish_scoring(kept: Sequence[str], rest: Sequence[str]) -> str:
    """The repair turn after a reply cut off at its token limit: what was complete stands, only the rest is
    asked, so the second reply is short enough to finish."""
    return (f"Your reply was cut off at its token limit. Your scores for {', '.join(kept)} were complete and "
            f"stand. Answer again (call {SUBMIT_REVIEW} if it is offered) with the JSON object scoring only: "
            f"{', '.join(rest)}; each reasoning one or two sentences, each score a whole number from 1 to 5.")


def ask_evidence(dims: Sequence[str]) -> str:
    """The one ask for evidence, for scores whose reasoning cites none."""
    return (f"Your scores for {', '.join(dims)} cite no evidence. For each, name the evidence it rests on (an "
            "E-number, a file:line, or a command and what it printed) and change the score if the evidence does "
            "not support it. Reply with the whole JSON object again, every dimension included.")


def submit_review_tool(dim_names: Sequence[str]) -> dict[str, Any]:
    """The ``submit_review`` function tool; dimension names are an enum so the model cannot misspell them."""
    return {
        "type": "function",
        "function": {
            "name": SUBMIT_REVIEW,
            "description": "Submit the scores of the review: one entry per dimension, then a short summary.",
            "parameters": {
                "type": "object",
                "properties": {
                    "scores": {
                        "type": "array",
                        "description": "One entry per evaluation dimension.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "dimension": {"type": "string", "enum": list(dim_names)},
                                "reasoning": {"type": "string",
                                              "description": "What the evidence shows, citing E-numbers or "
                                                             "file:line"},
                                "score": {"type": "number", "minimum": 1, "maximum": 5,
                                          "description": "1 (worst) to 5 (best), following the rubric"},
                                "evidence": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "properties": {
                                            "file": {"type": "string"},
                                            "line": {"type": "integer"},
                                            "note": {"type": "string"},
                                        },
                                        "required": ["note"],
                                    },
                                },
                            },
                            "required": ["dimension", "reasoning", "score"],
                        },
                    },
                    "summary": {"type": "string", "description": "Two or three sentences on the whole result."},
                    "suggestions": {"type": "array", "items": {"type": "string"},
                                    "description": "Concrete changes that would raise the low scores."},
                },
                "required": ["scores", "summary"],
            },
        },
    }


CHECKLIST_SYSTEM = (
    "You are a careful reviewer answering yes/no questions about an AI agent's work from the evidence polpo "
    "gathered and a reviewer's analysis. Reply with one JSON object and nothing else. Answer yes only when the "
    "evidence shows it; a FAILED evidence item counts against the work."
)


def checklist_user(*, analysis: str, evidence: str, questions: Sequence[str]) -> str:
    listed = "\n".join(f"Q{i}. {q}" for i, q in enumerate(questions, 1))
    return (
        f"REVIEWER'S ANALYSIS:\n{head(analysis, ANALYSIS_MAX)}\n\nEVIDENCE:\n{head(evidence, EVIDENCE_MAX) or '(none)'}"
        f"\n\nQUESTIONS:\n{listed}\n\nAnswer every question in order. Reply with exactly this JSON shape (the "
        '<…> parts are yours to fill):\n{"answers": [{"question": <its number>, "evidence": <what shows it: an '
        'E-number, a file:line, or a command and its output>, "answer": <yes or no>}, <one object like it per '
        "question>]}"
    )
