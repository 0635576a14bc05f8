"""A reviewer's ``submit_review`` payload, checked against the task's dimensions. Pure.

Lenient where leniency cannot change a verdict (extra keys ignored, ``{"dim": 4}`` read as a score list, ``"4"``
read as 4, evidence given as a string kept, a list item that scores nothing dropped), strict where it can: a score
is a number in 1..5 — 7 or 0 is an error of the strategy that produced it, never clamped — and every dimension is
scored exactly once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from polpo.review.consensus import DimScore
from polpo.review.dimensions import Dim, dim_key
from polpo.review.parsing import json_number

__all__ = ["Submission", "merge_submissions", "validate_submission"]


class _EvidenceIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    file: str = ""
    line: int | None = None
    note: str = ""

    @model_validator(mode="before")
    @classmethod
    def _lenient(cls, v: object) -> object:
        """Evidence is supporting detail: a malformed item becomes a note instead of voiding the scores."""
        if isinstance(v, str):
            return {"note": v}
        if not isinstance(v, Mapping):
            return {"note": json.dumps(v, default=str)}
        out = dict(v)
        for key in ("file", "note"):
            if key in out and not isinstance(out[key], str):
                out[key] = "" if out[key] is None else str(out[key])
        line = out.get("line")
        if isinstance(line, bool) or not (isinstance(line, int) or (isinstance(line, str) and line.strip().isdigit())):
            out["line"] = None
        return out


class _ScoreIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    dimension: str = Field(min_length=1)
    score: float
    reasoning: str = ""
    evidence: list[_EvidenceIn] = []

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, v: object) -> object:
        if isinstance(v, Mapping) and not v.get("reasoning"):
            v = {**v, "reasoning": v.get("reason") or v.get("explanation") or v.get("rationale") or ""}
        return v

    @field_validator("score", mode="before")
    @classmethod
    def _is_number(cls, v: object) -> object:
        return json_number(v)

    @field_validator("score")
    @classmethod
    def _in_scale(cls, v: float) -> float:
        if not math.isfinite(v) or not 1 <= v <= 5:
            raise ValueError(f"score {v:g} is outside 1..5")
        return v

    @field_validator("evidence", mode="before")
    @classmethod
    def _evidence_list(cls, v: object) -> object:
        if v is None:
            return []
        return v if isinstance(v, list) else [v]


class _ReviewIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    scores: list[_ScoreIn] = Field(min_length=1)
    summary: str = ""
    suggestions: list[str] = []

    @model_validator(mode="before")
    @classmethod
    def _stray_items(cls, v: object) -> object:
        """Items of the ``scores`` list that score nothing (no ``dimension``, no ``score``) are dropped, and a
        ``summary`` or ``suggestions`` a model wrote as the list's last item (seen on Qwen2.5-Coder-1.5B) is read
        as the review's own. Neither can change a verdict; rejecting them lost whole reviews."""
        if not isinstance(v, Mapping) or not isinstance(v.get("scores"), list):
            return v
        out = dict(v)
        kept: list[object] = []
        for item in v["scores"]:
            if isinstance(item, Mapping) and "dimension" not in item and "score" not in item:
                for key in ("summary", "suggestions"):
                    if item.get(key) and not out.get(key):
                        out[key] = item[key]
                continue
            kept.append(item)
        out["scores"] = kept
        return out

    @field_validator("scores", mode="before")
    @classmethod
    def _mapping_form(cls, v: object) -> object:
        """``{"correctness": 4}`` or ``{"correctness": {"score": 4, …}}`` → the list form."""
        if isinstance(v, Mapping):
            return [{"dimension": k, **(s if isinstance(s, Mapping) else {"score": s})} for k, s in v.items()]
        return v

    @field_validator("summary", mode="before")
    @classmethod
    def _text(cls, v: object) -> object:
        return "" if v is None else v

    @field_validator("suggestions", mode="before")
    @classmethod
    def _strings(cls, v: object) -> object:
        if isinstance(v, str):
            return [v]
        return [s for s in v if isinstance(s, str) and s.strip()] if isinstance(v, list) else []


@dataclass(frozen=True)
class Submission:
    scores: list[DimScore]
    """In the dimensions' order."""
    summary: str
    suggestions: list[str]
    ignored: list[str]
    written: tuple[tuple[str | None, float], ...] = ()
    """Every score entry in the order the model wrote it: the dimension it counts for (None: ignored or
    repeated) and its value — to find each score's token in the reply (:mod:`polpo.review.geval`)."""


def _describe(exc: ValidationError, data: object) -> str:
    items = data.get("scores") if isinstance(data, Mapping) else None
    parts: list[str] = []
    for e in exc.errors()[:6]:
        loc = e["loc"]
        where = ".".join(str(p) for p in loc) or "payload"
        if len(loc) >= 2 and loc[0] == "scores" and isinstance(loc[1], int) and isinstance(items, list):
            item = items[loc[1]] if loc[1] < len(items) else None
            if isinstance(item, Mapping) and item.get("dimension"):
                where += f" ({item['dimension']})"
        msg = str(e["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {msg}")
    return "; ".join(parts)


def validate_submission(data: object, dims: Sequence[Dim]) -> Submission:
    """A ``submit_review`` payload checked against the dimensions; ValueError with a readable reason. Pure."""
    if isinstance(data, str):  # some models double-encode the arguments
        try:
            data = json.loads(data)
        except ValueError:
            raise ValueError("the payload is a string, not a JSON object") from None
    if not isinstance(data, Mapping):
        raise ValueError("the payload is not a JSON object")
    try:
        parsed = _ReviewIn.model_validate(data)
    except ValidationError as exc:
        raise ValueError(_describe(exc, data)) from None
    wanted = {d.key: d for d in dims}
    seen: dict[str, DimScore] = {}
    ignored: list[str] = []
    repeated: list[str] = []
    written: list[tuple[str | None, float]] = []
    for s in parsed.scores:
        key = dim_key(s.dimension)
        dim = wanted.get(key)
        if dim is None:
            ignored.append(s.dimension)
            written.append((None, s.score))
            continue
        if key in seen:
            repeated.append(dim.name)
            written.append((None, s.score))
            continue
        written.append((dim.name, s.score))
        evidence = [e.model_dump() for e in s.evidence]
        seen[key] = DimScore(dim.name, s.score, s.reasoning.strip(), evidence)
    missing = [d.name for d in dims if d.key not in seen]
    problems = []
    if missing:
        problems.append("missing score for " + ", ".join(missing))
    if repeated:
        problems.append("scored more than once: " + ", ".join(sorted(set(repeated))))
    if problems:
        extra = f" (unknown dimensions given: {', '.join(ignored)})" if ignored else ""
        raise ValueError("; ".join(problems) + extra)
    return Submission([seen[d.key] for d in dims], parsed.summary.strip(), parsed.suggestions, ignored,
                      tuple(written))


def merge_submissions(kept: Submission, rest: Submission, dims: Sequence[Dim]) -> Submission:
    """One submission of the scores ``kept`` from a reply cut off at its token limit and the ``rest`` asked for
    after it, in the dimensions' order. A kept dimension the second reply scored again is not counted twice:
    the kept score stands, as the model was told. Pure."""
    by_name = {s.dimension: s for s in rest.scores} | {s.dimension: s for s in kept.scores}
    kept_keys = {dim_key(s.dimension) for s in kept.scores}
    ignored = kept.ignored + [n for n in rest.ignored if dim_key(n) not in kept_keys]
    return Submission([by_name[d.name] for d in dims if d.name in by_name], rest.summary or kept.summary,
                      kept.suggestions + rest.suggestions, ignored, kept.written + rest.written)


# ------------------------------------------------------------------------------------------------- the run
