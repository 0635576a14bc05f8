"""Dimensions (pure parts): defaults, given ones, generated ones' validation, choice, rubric text, JSON."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from polpo.checks.llm_review import Dimension, LlmReviewExpectation
from polpo.review.dimensions import (
    DEFAULT_DIMENSIONS,
    LEVELS,
    SCORE_SCALE,
    Dim,
    choose,
    dim_key,
    dims_from_json,
    dims_to_json,
    from_given,
    needs_generation,
    render_rubric,
    validate_generated,
)
from polpo.review.parsing import JSONNotFound, extract_json


def review(**kw: Any) -> LlmReviewExpectation:
    return LlmReviewExpectation.model_validate({"type": "llm_review", **kw})


def gen(name: str, weight: Any = 0.3, **kw: Any) -> dict[str, Any]:
    return {"name": name, "weight": weight, "description": f"judges {name}", **kw}


# ------------------------------------------------------------------------------------------------ defaults


def test_defaults() -> None:
    assert [d.name for d in DEFAULT_DIMENSIONS] == ["correctness", "completeness", "code_quality", "edge_cases"]
    assert [d.weight for d in DEFAULT_DIMENSIONS] == [0.35, 0.30, 0.20, 0.15]
    assert math.isclose(math.fsum(d.weight for d in DEFAULT_DIMENSIONS), 1.0)
    for d in DEFAULT_DIMENSIONS:
        assert tuple(d.levels) == LEVELS
        assert all(d.levels[k] for k in LEVELS)
        assert d.description


# ------------------------------------------------------------------------------------------------ rubric text


def test_rubric_text() -> None:
    text = render_rubric([Dim("quality", 0.5, "Overall quality", {"5": "great", "1": "bad"})])
    assert "quality (weight: 0.5)" in text
    assert "Overall quality" in text
    assert "1: bad" in text and "5: great" in text
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()[:2] in {f"{k}:" for k in LEVELS}]
    assert [ln[0] for ln in lines] == list(LEVELS)  # sorted 1..5, the missing ones from the generic scale
    assert f"3: {SCORE_SCALE['3']}" in text


def test_rubric_without_levels_uses_generic_scale_and_guidance() -> None:
    text = render_rubric([Dim("security", 1.0, "", guidance="No injection, no auth bypass")])
    for k in LEVELS:
        assert f"{k}: {SCORE_SCALE[k]}" in text
    assert "Guidance: No injection, no auth bypass" in text


# ------------------------------------------------------------------------------------------------ given


def test_from_given_text_and_map_rubrics() -> None:
    dims = from_given([
        Dimension(name="security", weight=0.5, description="safe", rubric="No SQL injection"),
        Dimension.model_validate({"name": "perf", "weight": 0.5, "rubric": {"5": "optimal", "1": "O(n^2)"}}),
    ])
    assert dims[0].guidance == "No SQL injection" and dict(dims[0].levels) == {}
    assert dict(dims[1].levels) == {"1": "O(n^2)", "5": "optimal"}
    assert dims[1].level("3") == SCORE_SCALE["3"]
    assert [d.weight for d in dims] == [0.5, 0.5]  # kept as written


def test_from_given_duplicate_names_get_suffixes() -> None:
    dims = from_given([Dimension(name="Security", weight=0.4), Dimension(name="security", weight=0.3),
                       Dimension(name="security", weight=0.3)])
    assert [d.name for d in dims] == ["Security", "security_2", "security_3"]
    assert len({d.key for d in dims}) == 3


def test_dim_key() -> None:
    assert dim_key("Code Quality") == dim_key("code-quality") == dim_key(" code_quality ") == "code_quality"
    assert dim_key("!!!") == "!!!"


# ------------------------------------------------------------------------------------------------ choice


def test_choose_given_generated_default() -> None:
    given = review(dimensions=[{"name": "api", "weight": 1.0, "description": "REST"}])
    generated = [Dim("x", 0.5), Dim("y", 0.25), Dim("z", 0.25)]
    dims, source = choose(given.dimensions, generated)
    assert source == "given" and [d.name for d in dims] == ["api"]
    dims, source = choose(review(criteria="c").dimensions, generated)
    assert source == "generated" and dims == generated
    dims, source = choose(review(criteria="c").dimensions, None)
    assert source == "default" and dims == list(DEFAULT_DIMENSIONS)
    dims, source = choose(review(criteria="c", dimensions=[]).dimensions, [])
    assert source == "default"


def test_needs_generation() -> None:
    assert needs_generation(review(criteria="c").dimensions)
    assert needs_generation(review(prompt="p", dimensions=[]).dimensions)
    assert not needs_generation(review(dimensions=[{"name": "a", "weight": 1}]).dimensions)


# ------------------------------------------------------------------------------------------------ JSON


def test_json_round_trip() -> None:
    dims = [*DEFAULT_DIMENSIONS, Dim("s", 0.2, "d", {"2": "two"}, "text")]
    data = json.loads(json.dumps(dims_to_json(dims)))
    assert dims_from_json(data) == dims


def test_from_json_reads_mission_style_rubric() -> None:
    (a, b) = dims_from_json([{"name": "a", "weight": 0.5, "rubric": "free text"},
                             {"name": "b", "weight": 0.5, "rubric": {"1": "bad", "9": "ignored"}}])
    assert a.guidance == "free text"
    assert dict(b.levels) == {"1": "bad"}


# ------------------------------------------------------------------------------------------------ generated


def test_validate_generated_normalises() -> None:
    dims = validate_generated({"dimensions": [
        gen("Visual Fidelity", 2, rubric={"1": "bad", "5": "good", "7": "noise", "3": 3}),
        gen("technical_quality", 1),
        gen("deliverables", "1"),
    ]})
    assert [d.name for d in dims] == ["visual_fidelity", "technical_quality", "deliverables"]
    assert [d.weight for d in dims] == [0.5, 0.25, 0.25]
    assert dict(dims[0].levels) == {"1": "bad", "5": "good"}


def test_validate_generated_accepts_bare_array_of_four() -> None:
    dims = validate_generated([gen("a", 0.25), gen("b", 0.25), gen("c", 0.25), gen("d", 0.25)])
    assert len(dims) == 4 and math.isclose(math.fsum(d.weight for d in dims), 1.0)


@pytest.mark.parametrize(
    "payload",
    [
        {"dimensions": [gen("a"), gen("b")]},  # too few
        {"dimensions": [gen(c) for c in "abcde"]},  # too many
        {"dimensions": [gen("a"), gen("A"), gen("b")]},  # same name once normalised
        {"dimensions": [gen("a", 0), gen("b"), gen("c")]},
        {"dimensions": [gen("a", -0.2), gen("b"), gen("c")]},
        {"dimensions": [gen("a", True), gen("b"), gen("c")]},
        {"dimensions": [gen("a", "heavy"), gen("b"), gen("c")]},
        {"dimensions": [gen("a", float("nan")), gen("b"), gen("c")]},
        {"dimensions": [{"name": "a", "weight": 0.3}, gen("b"), gen("c")]},  # no description
        {"dimensions": [gen(""), gen("b"), gen("c")]},
        {"dims": [gen("a"), gen("b"), gen("c")]},
        "three dimensions",
        None,
    ],
)
def test_validate_generated_rejects(payload: Any) -> None:
    with pytest.raises(ValueError):
        validate_generated(payload)


# ------------------------------------------------------------------------------------------------ lenient JSON


def test_extract_json_fences_prose_and_trailing_commas() -> None:
    assert extract_json('Sure!\n```json\n{"a": 1}\n```\nbye') == {"a": 1}
    assert extract_json('noise {not json} then {"a": "}", "b": [1,2,],}') == {"a": "}", "b": [1, 2]}
    assert extract_json('here: [1, 2] and {"x": 1}', kind="array") == [1, 2]
    assert extract_json('{"a": 1} {"b": 2}') == {"a": 1}
    for bad in ("", "   ", "no json here", "[1, 2]"):
        with pytest.raises(JSONNotFound):
            extract_json(bad)


# ------------------------------------------------------------------------------------ anchors (examples)


def test_examples_are_shown_as_anchors_and_a_file_example_is_read_from_the_workspace(tmp_path: Path) -> None:
    from pydantic import TypeAdapter, ValidationError

    from polpo.checks.base import CheckContext
    from polpo.checks.llm_review import EXAMPLE_FILE_CHARS, Dimension, _with_anchors
    from polpo.clock import FakeClock

    adapter = TypeAdapter(list[Dimension])
    given = adapter.validate_python([{"name": "quality", "weight": 1, "examples": [
        {"output": "def reverse(s): return s[::-1]", "score": 4, "why": "correct, no docs"},
        {"file": "anchors/best.py", "score": 5}]}])
    dims = from_given(given)
    assert dims[0].examples[0] == {"output": "def reverse(s): return s[::-1]", "score": 4.0, "why": "correct, no docs"}
    (tmp_path / "anchors").mkdir()
    (tmp_path / "anchors" / "best.py").write_text('def reverse(s: str) -> str:\n    """Reverse."""\n')
    ready = _with_anchors(dims, CheckContext(workspace=tmp_path, clock=FakeClock(), check_timeout=5))
    rubric = render_rubric(ready)
    assert "Scored examples (anchors: score like these):" in rubric
    assert "- score 4.0: def reverse(s): return s[::-1] — why: correct, no docs" in rubric
    assert '- score 5.0: def reverse(s: str) -> str: """Reverse."""' in rubric
    assert Dim.from_json(ready[0].to_json()).examples == ready[0].examples  # stored with the yardstick
    os.mkfifo(tmp_path / "anchors" / "worst.py")  # read on the event loop: a FIFO must not hold it
    (tmp_path / "anchors" / "huge.py").write_text("x" * 100_000)
    odd = from_given(adapter.validate_python([{"name": "quality", "weight": 1, "examples": [
        {"file": "anchors/worst.py", "score": 1}, {"file": "anchors/huge.py", "score": 2}]}]))
    worst, huge = _with_anchors(odd, CheckContext(workspace=tmp_path, clock=FakeClock(), check_timeout=5))[0].examples
    assert worst["output"] == ("(example file anchors/worst.py could not be read: it is not a text file in the "
                               "workspace)")
    assert huge["output"] == "x" * EXAMPLE_FILE_CHARS
    for bad in ({"score": 3}, {"output": "x", "file": "y", "score": 3}, {"output": "x", "score": 6},
                {"file": "../secret", "score": 3}):
        with pytest.raises(ValidationError):
            adapter.validate_python([{"name": "q", "weight": 1, "examples": [bad]}])
