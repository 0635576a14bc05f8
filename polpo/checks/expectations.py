"""What a mission file may write under ``expectations``: one model per check kind, and nothing else.

Kept apart from the check modules (which run processes, read files, call judges) and light — pydantic and
:mod:`polpo.docmodel` only — so validating a mission loads no check's machinery. Each check module names its
model as ``CheckType.model``; :mod:`polpo.checks.registry` indexes the kinds, and a test keeps the index and the
check modules in step.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BeforeValidator,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from polpo.docmodel import Confidence, Model, Name, NonEmpty
from polpo.durations import Duration

__all__ = ["MAX_PATHS", "MAX_SAMPLES", "PERCENT", "ChecklistItem", "Dimension", "Example", "FileContentExpectation",
           "FileExistsExpectation", "LlmReviewExpectation", "MetricExpectation", "ReferenceFile", "ReviewExample",
           "ScriptExpectation", "TestExpectation", "relative_path_problem"]

MAX_PATHS = 1000  # per file_exists expectation; a check is not a way to stat a whole tree
MAX_SAMPLES = 5  # runs of each llm_review reviewer


def relative_path_problem(p: str) -> str | None:
    """Why ``p`` is not a workspace-relative path, or None."""
    if "\x00" in p:
        return "a path cannot contain a NUL byte"
    pp = PurePosixPath(p.strip())
    if pp.is_absolute() or p.strip().startswith("~"):
        return f"{p!r} is absolute: paths are relative to the mission's workspace"
    if ".." in pp.parts:
        return f"{p!r} leaves the workspace ('..')"
    return None


# ---------------------------------------------------------------------------------------------- file_exists


class FileExistsExpectation(Model):
    type: Literal["file_exists"]
    path: NonEmpty | None = None
    paths: list[NonEmpty] | None = None
    confidence: Confidence | None = None

    @field_validator("path")
    @classmethod
    def _relative(cls, v: str | None) -> str | None:
        if v is not None and (why := relative_path_problem(v)):
            raise ValueError(why)
        return v

    @field_validator("paths")
    @classmethod
    def _all_relative(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        if len(v) > MAX_PATHS:
            raise ValueError(f"at most {MAX_PATHS} paths per file_exists expectation")
        for p in v:
            if why := relative_path_problem(p):
                raise ValueError(why)
        return v

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if (self.path is None) == (self.paths is None):
            raise ValueError("give exactly one of path or paths")
        if self.paths is not None and not self.paths:
            raise ValueError("paths must list at least one file")
        return self

    @property
    def all_paths(self) -> list[str]:
        return [self.path] if self.path is not None else list(self.paths or ())


# --------------------------------------------------------------------------------------------- file_content


class FileContentExpectation(Model):
    type: Literal["file_content"]
    path: NonEmpty
    expected: str
    match: Literal["exact", "contains", "regex"] = "exact"
    confidence: Confidence | None = None

    @field_validator("match", mode="before")
    @classmethod
    def _any_case(cls, v: object) -> object:
        return v.lower() if isinstance(v, str) else v  # agent-judge writes EXACT / CONTAINS

    @field_validator("path")
    @classmethod
    def _relative(cls, v: str) -> str:
        if why := relative_path_problem(v):
            raise ValueError(why)
        return v

    @model_validator(mode="after")
    def _pattern(self) -> Self:
        if self.match == "regex":
            try:
                re.compile(self.expected, re.MULTILINE)
            except re.error as e:
                raise ValueError(f"expected is not a valid regular expression: {e}") from None
        elif self.match == "contains" and not self.expected:
            raise ValueError("contains needs a non-empty expected text")
        return self


# ------------------------------------------------------------------------------------------- test, script


class TestExpectation(Model):
    __test__ = False  # tell pytest this is not a test class
    type: Literal["test"]
    command: NonEmpty
    timeout: Duration | None = None
    confidence: Confidence | None = None


class ScriptExpectation(Model):
    type: Literal["script"]
    command: NonEmpty
    expect_exit_code: int = 0
    timeout: Duration | None = None
    confidence: Confidence | None = None


# -------------------------------------------------------------------------------------------------- metric

PERCENT = re.compile(r"\s*(\d+(?:\.\d+)?)\s*%\s*")  # a tolerance relative to the baseline: "5%"
_Number = Annotated[float, Field(allow_inf_nan=False)]


class MetricExpectation(Model):
    """A number a command prints, compared with min and max and/or with its value before the task ran (baseline).
    It needs min, max or baseline; better and tolerance apply to the baseline only."""

    type: Literal["metric"]
    command: NonEmpty = Field(description="Runs with bash in the workspace and prints the number (standard "
                                          "output; the last number printed, unless pattern says where it is).")
    name: NonEmpty | None = Field(None, description='What the number is ("coverage", "bundle size"): the '
                                                    "check's label.")
    pattern: str | None = Field(None, description="A regular expression: the number is the last one in its last "
                                                  "match (in its first group when it has groups).")
    min: _Number | None = Field(None, description="Passes when the value is at least this.")
    max: _Number | None = Field(None, description="Passes when the value is at most this.")
    baseline: Literal["before"] | None = Field(
        None, description='"before": passes when the value is no worse than the one measured in the workspace '
                          "before the task's first attempt (measured once, reused by every fix and retry).")
    better: Literal["higher", "lower"] | None = Field(
        None, description='Which way is better, for baseline (default "higher"; "lower" for a size, a runtime, '
                          "a count of warnings).")
    tolerance: _Number | str | None = Field(
        None, description='How much worse than the baseline still passes: a number in the metric\'s units, or a '
                          'percentage of the baseline ("5%"). Default 0.')
    timeout: Duration | None = Field(None, description="Seconds (or ISO-8601); default [defaults] check_timeout.")

    @field_validator("pattern")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v, re.MULTILINE)
            except re.error as e:
                raise ValueError(f"pattern is not a valid regular expression: {e}") from None
        return v

    @field_validator("max")
    @classmethod
    def _not_below_min(cls, v: float | None, info: ValidationInfo) -> float | None:
        low = info.data.get("min")
        if v is not None and low is not None and v < low:
            raise ValueError(f"max ({v:g}) is below min ({low:g}): no value could pass")
        return v

    @field_validator("better")
    @classmethod
    def _better_needs_baseline(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and info.data.get("baseline") is None:
            raise ValueError('better says which way is no worse than the baseline: it needs "baseline": "before" '
                             "(min and max need no direction)")
        return v

    @field_validator("tolerance")
    @classmethod
    def _tolerance(cls, v: float | str | None, info: ValidationInfo) -> float | str | None:
        if v is None:
            return v
        if info.data.get("baseline") is None:
            raise ValueError('tolerance loosens the comparison with the baseline: it needs "baseline": "before" '
                             "(loosen min or max instead)")
        if isinstance(v, str) and not PERCENT.fullmatch(v):
            raise ValueError(f'tolerance {v!r} is neither a number nor a percentage such as "5%"')
        if isinstance(v, float | int) and v < 0:
            raise ValueError(f"tolerance ({v:g}) cannot be negative: 0 means no worse at all")
        return v

    @model_validator(mode="after")
    def _something_to_compare_with(self) -> Self:
        if self.min is None and self.max is None and self.baseline is None:
            raise ValueError('a metric needs something to compare its number with: "min", "max" or '
                             '"baseline": "before"')
        return self

    @property
    def direction(self) -> Literal["higher", "lower"]:
        return self.better or "higher"


# ---------------------------------------------------------------------------------------------- llm_review


def _check_rubric(v: object) -> object:
    """One clear message instead of pydantic's per-union-member errors."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, dict) and all(k in ("1", "2", "3", "4", "5") and isinstance(t, str) for k, t in v.items()):
        return v
    raise ValueError('a rubric is text or a map from "1".."5" to text')


class Example(Model):
    """A scored anchor: an output (or a workspace file holding one), the score it deserves, and why."""

    output: str | None = None
    file: NonEmpty | None = None
    score: float = Field(ge=1, le=5)
    why: str = ""

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.output is None) == (self.file is None):
            raise ValueError('an example gives exactly one of "output" or "file"')
        if self.file is not None and (why := relative_path_problem(self.file)):
            raise ValueError(why)
        return self


class Dimension(Model):
    name: NonEmpty
    weight: float = Field(gt=0, le=1)
    description: str = ""
    rubric: Annotated[str | dict[Literal["1", "2", "3", "4", "5"], str] | None,
                      BeforeValidator(_check_rubric)] = None
    examples: list[Example] | None = None
    critical: bool = False
    """The review fails when this dimension scores below the threshold, whatever the others score."""


class ReferenceFile(Model):
    """A reference kept in a file of the workspace (inline text is how a reference stays out of the agent's sight:
    a mission may not name a file outside its workspace)."""

    file: NonEmpty

    @field_validator("file")
    @classmethod
    def _relative(cls, v: str) -> str:
        if why := relative_path_problem(v):
            raise ValueError(why)
        return v


class ReviewExample(Example):
    """A scored example of the review as a whole (an anchor): the work, the score it deserves, why, and the
    task it answered when that is not this one."""

    task: str | None = None


class ChecklistItem(Model):
    """A yes/no question about the work (yes is good), the dimension it scores and its weight there."""

    question: Name
    dimension: str | None = None
    weight: float = Field(1.0, gt=0)


MAX_CHECKLIST = 30


def _checklist_items(v: object) -> object:
    """Plain strings are questions of the default checklist dimension."""
    if isinstance(v, list):
        return [{"question": q} if isinstance(q, str) else q for q in v]
    return v


def _text_or(tag: str) -> Any:
    """A discriminator between a text and ``tag`` (an object or a list), so a wrong value gets one error at its
    own JSON path instead of one per shape pydantic tried (``reference.str``…)."""
    def kind(v: object) -> str | None:
        return "text" if isinstance(v, str) else tag if isinstance(v, dict if tag == "object" else list) else None
    return kind


Reference = Annotated[Annotated[str, Tag("text")] | Annotated[ReferenceFile, Tag("object")],
                      Discriminator(_text_or("object"), custom_error_type="reference_shape",
                                    custom_error_message='must be the reference text or {"file": "<its path>"}')]
Examples = Annotated[Annotated[str, Tag("text")] | Annotated[list[ReviewExample], Tag("list")],
                     Discriminator(_text_or("list"), custom_error_type="examples_shape",
                                   custom_error_message="must be a list of scored examples or the path of a "
                                                        "labels file")]


class LlmReviewExpectation(Model):
    type: Literal["llm_review"]
    criteria: str | None = None
    prompt: str | None = None
    dimensions: list[Dimension] | None = None
    threshold: float = Field(3.0, ge=1, le=5)
    samples: int = Field(1, ge=1, le=MAX_SAMPLES)
    confidence: Confidence | None = None
    reference: Reference | None = None
    """A reference answer or expected output to compare the work with: the text, or ``{"file": path}``."""
    examples: Examples | None = None
    """Scored examples shown as anchors, or the path of a labels file (``polpo labels export``'s output)."""
    checklist: Annotated[list[ChecklistItem] | None, BeforeValidator(_checklist_items)] = None
    """Yes/no questions that score the dimensions they name (all of them when no dimensions are given). That each
    names one of the given dimensions is checked over the whole document (:mod:`polpo.mission.crosscheck`), so
    the error names the question's own JSON path."""

    @field_validator("examples")
    @classmethod
    def _labels_path(cls, v: str | list[ReviewExample] | None) -> str | list[ReviewExample] | None:
        if isinstance(v, str) and not v.strip():
            raise ValueError("give a list of scored examples or the path of a labels file")
        if isinstance(v, str) and (why := relative_path_problem(v)):
            raise ValueError(f"{why} (a labels file is read from the workspace)")
        return v

    @field_validator("checklist")
    @classmethod
    def _questions(cls, v: list[ChecklistItem] | None) -> list[ChecklistItem] | None:
        if v is not None and not v:
            raise ValueError("give at least one question (or leave checklist out)")
        if v is not None and len(v) > MAX_CHECKLIST:
            raise ValueError(f"at most {MAX_CHECKLIST} questions (got {len(v)})")
        return v

    @model_validator(mode="after")
    def _something_to_judge(self) -> Self:
        if not (self.criteria or "").strip() and not (self.prompt or "").strip() and not self.dimensions \
                and not self.checklist:
            raise ValueError("an llm_review needs criteria, a prompt, dimensions or a checklist")
        return self

    @property
    def text(self) -> str:
        return self.criteria or self.prompt or ""
