"""The dimensions an ``llm_review`` is scored on: given by the mission, generated for the task, or the defaults.

A dimension set is chosen once per task and check (:func:`choose`) and stored by the engine
(:func:`dims_to_json` / :func:`dims_from_json`), so every fix and retry of the task is scored on the same scale:
regenerating them per attempt would let the yardstick drift between attempts.

Weights: given dimensions keep the weights the mission wrote (the global score divides by the sum of the weights,
so they need not add up to 1); generated ones are normalised to sum to 1; the defaults already do.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from polpo.llm.client import ChatClient, LLMError, ModelSettings
from polpo.llm.secrets import redact
from polpo.review import prompts
from polpo.review.keys import dim_key
from polpo.review.parsing import JSONNotFound, extract_json, json_number

__all__ = ["DEFAULT_DIMENSIONS", "LEVELS", "SCORE_SCALE", "Dim", "DimSource", "Generation", "choose", "dim_key",
           "dims_from_json", "dims_to_json", "from_given", "generate_dimensions", "generate_dimensions_traced",
           "needs_generation", "render_rubric", "validate_generated"]

DimSource = Literal["given", "generated", "default"]
EXAMPLE_CHARS = 1500  # of an anchor's output, in the rubric
LEVELS: tuple[str, ...] = ("1", "2", "3", "4", "5")

#: The generic meaning of each score; a dimension without its own text for a level shows this one.
SCORE_SCALE: dict[str, str] = {
    "1": "Completely wrong or missing",
    "2": "Major issues, barely functional",
    "3": "Acceptable but with notable gaps",
    "4": "Good quality with minor issues",
    "5": "Excellent, exceeds expectations",
}


@dataclass(frozen=True)
class Dim:
    """One scoring dimension. ``levels`` holds the rubric lines that were given ("1".."5" → text);
    ``guidance`` a rubric given as one free text. Missing levels fall back to :data:`SCORE_SCALE`."""

    name: str
    weight: float
    description: str = ""
    levels: Mapping[str, str] = field(default_factory=dict)
    guidance: str = ""
    examples: tuple[Mapping[str, Any], ...] = ()
    """Scored anchors (seed 002's calibration examples): ``{output | file, score, why}``; a ``file`` is read
    from the workspace into ``output`` before the reviewers see it."""
    critical: bool = False
    """The work fails when this dimension scores below the threshold, whatever the others say
    (:func:`polpo.review.consensus.capped_score`)."""

    @property
    def key(self) -> str:
        return dim_key(self.name)

    def level(self, score: str) -> str:
        return self.levels.get(score) or SCORE_SCALE[score]

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "weight": self.weight, "description": self.description,
               "levels": {k: self.levels[k] for k in LEVELS if k in self.levels}, "guidance": self.guidance}
        if self.examples:
            out["examples"] = [dict(e) for e in self.examples]
        if self.critical:
            out["critical"] = True
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Dim:
        """Reads :meth:`to_json` output; also a mission-style ``{"rubric": text | {"1": …}}``."""
        levels = dict(data.get("levels") or {})
        guidance = str(data.get("guidance") or "")
        rubric = data.get("rubric")
        if isinstance(rubric, str):
            guidance = guidance or rubric
        elif isinstance(rubric, Mapping):
            levels = {**{str(k): str(v) for k, v in rubric.items()}, **levels}
        return cls(name=str(data["name"]), weight=float(data["weight"]),
                   description=str(data.get("description") or ""),
                   levels={k: str(levels[k]) for k in LEVELS if k in levels}, guidance=guidance,
                   examples=tuple(dict(e) for e in data.get("examples") or () if isinstance(e, Mapping)),
                   critical=bool(data.get("critical")))


def _dim(name: str, weight: float, description: str, levels: Sequence[str], *, critical: bool = False) -> Dim:
    return Dim(name, weight, description, dict(zip(LEVELS, levels, strict=True)), critical=critical)


DEFAULT_DIMENSIONS: tuple[Dim, ...] = (
    _dim("correctness", 0.35, "Does the output satisfy the task requirements? The task achieves its stated goals "
         "correctly.", (
             "Wrong or missing: the result does not do what the task asks, or does not work at all",
             "Major errors: the main goal is only partly met or key behaviour is broken",
             "Mostly correct: the main goal is met but there are notable mistakes",
             "Correct with minor issues that do not affect the main goal",
             "Fully correct: every stated goal is met and the behaviour was verified",
         ), critical=True),
    _dim("completeness", 0.30, "Are all aspects of the task addressed? Every requirement in the description is "
         "handled.", (
             "Most requirements are missing",
             "Several requirements are missing or only stubbed",
             "The main requirements are addressed; some secondary ones are missing",
             "All requirements are addressed; a few details are thin",
             "Every requirement is addressed thoroughly, nothing left as a placeholder",
         )),
    _dim("code_quality", 0.20, "Is the work clean, idiomatic, readable and maintainable?", (
        "Unreadable or unmaintainable: no structure, dead or duplicated code everywhere",
        "Hard to follow: poor naming, large tangled functions, copy-paste",
        "Acceptable: readable, with some clear structural or naming problems",
        "Clean and idiomatic with minor style issues",
        "Exemplary: clear structure and names, idiomatic, easy to change",
    )),
    _dim("edge_cases", 0.15, "Are edge cases and error conditions handled?", (
        "Errors and edge cases are ignored; ordinary bad input breaks it",
        "Only the happy path works; obvious edge cases fail",
        "Common edge cases are handled; some error paths are missing",
        "Most edge cases and errors are handled with clear messages",
        "Edge cases and error conditions are handled thoroughly and deliberately",
    )),
)


# ------------------------------------------------------------------------------------------------- given


class GivenDimension(Protocol):
    """A dimension as a mission writes it (``polpo.checks.llm_review.Dimension`` fits)."""

    @property
    def name(self) -> str: ...

    @property
    def weight(self) -> float: ...

    @property
    def description(self) -> str: ...

    @property
    def rubric(self) -> str | Mapping[Any, str] | None: ...


def from_given(given: Sequence[GivenDimension]) -> list[Dim]:
    """The mission's dimensions as :class:`Dim` (rubric text → ``guidance``, a "1".."5" map → ``levels``).

    Two names with the same :func:`dim_key` would make reviewers' answers ambiguous, so later ones get a
    ``_2``, ``_3`` suffix rather than being dropped: every dimension the mission asked for is still scored.
    """
    out: list[Dim] = []
    seen: set[str] = set()
    for d in given:
        name = d.name.strip()
        base, n = name, 1
        while dim_key(name) in seen:
            n += 1
            name = f"{base}_{n}"
        seen.add(dim_key(name))
        levels: dict[str, str] = {}
        guidance = ""
        if isinstance(d.rubric, str):
            guidance = d.rubric.strip()
        elif d.rubric:
            given_levels: dict[str, str] = {str(k): v for k, v in d.rubric.items()}
            levels = {k: given_levels[k] for k in LEVELS if k in given_levels}
        examples = tuple(e.model_dump(mode="json", exclude_none=True) if hasattr(e, "model_dump") else dict(e)
                         for e in getattr(d, "examples", None) or ())  # optional: anchors (llm_review)
        out.append(Dim(name=name, weight=float(d.weight), description=d.description.strip(),
                       levels=levels, guidance=guidance, examples=examples,
                       critical=bool(getattr(d, "critical", False))))
    return out


def needs_generation(given: Sequence[GivenDimension] | None) -> bool:
    """Whether the engine should call :func:`generate_dimensions` before :func:`choose` (none were given)."""
    return not given


def choose(given: Sequence[GivenDimension] | None, generated: Sequence[Dim] | None) -> tuple[list[Dim], DimSource]:
    """The dimensions to score on and where they came from: the mission's own, else generated, else defaults.

    Pure. ``dimensions: []`` counts as not given.
    """
    if given:
        return from_given(given), "given"
    if generated:
        return list(generated), "generated"
    return list(DEFAULT_DIMENSIONS), "default"


def dims_to_json(dims: Sequence[Dim]) -> list[dict[str, Any]]:
    return [d.to_json() for d in dims]


def dims_from_json(data: Sequence[Mapping[str, Any]]) -> list[Dim]:
    return [Dim.from_json(d) for d in data]


def render_rubric(dims: Sequence[Dim]) -> str:
    """The rubric block shown to reviewers: per dimension its weight, description and five level lines."""
    blocks: list[str] = []
    for d in dims:
        lines = [f"  {d.name} (weight: {d.weight:g}" + ("; critical: the work fails if this scores low" if d.critical
                                                       else "") + "):"]
        if d.description:
            lines.append(f"    Description: {d.description}")
        if d.guidance:
            lines.append(f"    Guidance: {d.guidance}")
        lines.append("    Scoring rubric:")
        lines.extend(f"    {k}: {d.level(k)}" for k in LEVELS)
        if d.examples:
            lines.append("    Scored examples (anchors: score like these):")
            for e in d.examples:
                shown = " ".join(str(e.get("output") or f"(file {e.get('file')})").split())
                lines.append(f"    - score {e.get('score')}: {shown[:EXAMPLE_CHARS]}"
                             + (f" — why: {e['why']}" if e.get("why") else ""))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


# ------------------------------------------------------------------------------------------------- generated


class _GeneratedDim(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(min_length=1, max_length=60)
    description: str = Field(min_length=1, max_length=1000)
    weight: float = Field(gt=0)
    rubric: dict[str, str] | str | None = None
    critical: bool = False

    @field_validator("critical", mode="before")
    @classmethod
    def _flag(cls, v: object) -> object:
        return v is True or (isinstance(v, str) and v.strip().lower() == "true")

    @field_validator("weight", mode="before")
    @classmethod
    def _is_number(cls, v: object) -> object:
        return json_number(v)

    @field_validator("name", "description", mode="before")
    @classmethod
    def _strip(cls, v: object) -> object:
        return v.strip() if isinstance(v, str) else v

    @field_validator("weight")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be finite")
        return v

    @field_validator("rubric", mode="before")
    @classmethod
    def _levels_only(cls, v: object) -> object:
        """Keep the "1".."5" entries whose text is a string; other keys are noise, not a reason to fail."""
        if isinstance(v, Mapping):
            return {str(k).strip(): t for k, t in v.items() if str(k).strip() in LEVELS and isinstance(t, str)}
        return v


class _GeneratedSet(BaseModel):
    model_config = ConfigDict(extra="ignore")
    dimensions: list[_GeneratedDim] = Field(min_length=3, max_length=4)

    @model_validator(mode="after")
    def _unique(self) -> _GeneratedSet:
        keys = [dim_key(d.name) for d in self.dimensions]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise ValueError(f"dimension names must be unique; repeated: {', '.join(dup)}")
        return self


def validate_generated(data: object) -> list[Dim]:
    """A judge's answer (``{"dimensions": [...]}`` or a bare array) → 3–4 dimensions; ValueError otherwise.

    Names become snake_case keys; weights are normalised to sum to 1. Pure.
    """
    if isinstance(data, list):
        data = {"dimensions": data}
    try:
        parsed = _GeneratedSet.model_validate(data)
    except ValidationError as exc:
        raise ValueError(_short_errors(exc)) from None
    total = math.fsum(d.weight for d in parsed.dimensions)
    out: list[Dim] = []
    for d in parsed.dimensions:
        levels = d.rubric if isinstance(d.rubric, dict) else {}
        guidance = d.rubric.strip() if isinstance(d.rubric, str) else ""
        out.append(Dim(name=dim_key(d.name), weight=round(d.weight / total, 6), description=d.description,
                       levels={k: levels[k] for k in LEVELS if k in levels}, guidance=guidance,
                       critical=d.critical))
    if sum(d.critical for d in out) > 1:  # "the one dimension without which the work fails": the heaviest
        top = max((d for d in out if d.critical), key=lambda d: d.weight)
        out = [replace(d, critical=d is top) for d in out]
    return out


def _short_errors(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors()[:5]:
        loc = ".".join(str(p) for p in e["loc"])
        parts.append(f"{loc}: {e['msg']}" if loc else str(e["msg"]))
    return "; ".join(parts)


@dataclass(frozen=True)
class Generation:
    """The outcome of one generation call, kept so the engine can record why it fell back to the defaults."""

    dims: list[Dim] | None
    error: str | None
    messages: list[dict[str, Any]]
    reply: str | None
    tokens: int = 0
    cost: float | None = None
    duration: float = 0.0
    error_kind: str | None = None
    """The LLM error kind when the call itself failed (an outage: nothing may be stored), else None."""

    def to_json(self) -> dict[str, Any]:
        return {"dimensions": dims_to_json(self.dims) if self.dims is not None else None, "error": self.error,
                "errorKind": self.error_kind,
                "messages": self.messages, "reply": self.reply, "tokens": self.tokens, "cost": self.cost,
                "duration": round(self.duration, 3)}


def _parse_generated(content: str) -> tuple[list[Dim] | None, str | None]:
    """An object ``{"dimensions": [...]}`` or a bare array, whichever validates (an array's first element is
    itself an object, so trying only the first JSON object found would miss a valid bare array)."""
    errors: list[str] = []
    for kind in ("object", "array"):
        try:
            data = extract_json(content, kind=kind)
        except JSONNotFound as exc:
            errors.append(str(exc))
            continue
        try:
            return validate_generated(data), None
        except ValueError as exc:
            errors.append(str(exc))
    return None, "invalid dimensions: " + errors[0]


async def generate_dimensions_traced(client: ChatClient, settings: ModelSettings, *, title: str,
                                     description: str, criteria: str) -> Generation:
    """Like :func:`generate_dimensions`, with the conversation and the reason of a failure. Never raises."""
    messages = [{"role": "system", "content": prompts.DIMENSIONS_SYSTEM},
                {"role": "user", "content": redact(prompts.dimensions_user(title, description, criteria))}]
    start = time.monotonic()
    try:
        reply = await client.chat(settings, messages, max_tokens=2000)
    except LLMError as exc:
        return Generation(None, f"{exc.kind}: {exc.message}", messages, None,
                          duration=time.monotonic() - start, error_kind=exc.kind)
    except Exception as exc:
        return Generation(None, redact(f"{type(exc).__name__}: {exc}")[:2000], messages, None,
                          duration=time.monotonic() - start)
    content = reply.content or ""
    dims, error = _parse_generated(content)
    return Generation(dims, error, messages, redact(content)[:20_000],
                      tokens=reply.prompt_tokens + reply.completion_tokens, cost=reply.cost,
                      duration=time.monotonic() - start)


async def generate_dimensions(client: ChatClient, settings: ModelSettings, *, title: str, description: str,
                              criteria: str) -> list[Dim] | None:
    """3–4 task-specific dimensions from one judge call, or None (the caller then uses the defaults)."""
    result = await generate_dimensions_traced(client, settings, title=title, description=description,
                                              criteria=criteria)
    return result.dims
