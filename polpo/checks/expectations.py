"""What a mission file may write under ``expectations``: one model per check kind, and nothing else.

Kept apart from the check modules (which run processes, read files, call judges) and light — pydantic and
:mod:`polpo.docmodel` only — so validating a mission loads no check's machinery. Each check module names its
model as ``CheckType.model``; :mod:`polpo.checks.registry` indexes the kinds, and a test keeps the index and the
check modules in step.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Annotated, Literal, Self

from pydantic import BeforeValidator, Field, field_validator, model_validator

from polpo.docmodel import Confidence, Model, NonEmpty
from polpo.durations import Duration

__all__ = ["MAX_PATHS", "MAX_SAMPLES", "Dimension", "Example", "FileContentExpectation", "FileExistsExpectation",
           "LlmReviewExpectation", "ScriptExpectation", "TestExpectation", "relative_path_problem"]

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
    file: str | None = None
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


class LlmReviewExpectation(Model):
    type: Literal["llm_review"]
    criteria: str | None = None
    prompt: str | None = None
    dimensions: list[Dimension] | None = None
    threshold: float = Field(3.0, ge=1, le=5)
    samples: int = Field(1, ge=1, le=MAX_SAMPLES)
    confidence: Confidence | None = None

    @model_validator(mode="after")
    def _something_to_judge(self) -> Self:
        if not (self.criteria or "").strip() and not (self.prompt or "").strip() and not self.dimensions:
            raise ValueError("an llm_review needs criteria, a prompt or dimensions")
        return self

    @property
    def text(self) -> str:
        return self.criteria or self.prompt or ""
