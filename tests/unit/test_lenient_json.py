"""Lenient reading of a model's JSON (:mod:`polpo.llm.lenient_json`, and through it ``extract_json``, the
tool registry's arguments and the reviewer's ``submit_review``): the slips small models make are read, valid
JSON reads exactly as ``json.loads`` reads it, and nothing cut off or guessed is ever accepted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polpo.llm.lenient_json import decode_value, loads, normalise
from polpo.review.dimensions import Dim
from polpo.review.parsing import JSONNotFound, complete_items, extract_json
from polpo.review.submission import validate_submission
from polpo.tools.output import ToolError
from polpo.tools.registry import decode_arguments

PROPS = settings(deadline=None, max_examples=200)

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@PROPS
@given(JSON_VALUES, st.sampled_from([None, 2]), st.booleans())
def test_valid_json_reads_exactly_as_json_loads(value: Any, indent: int | None, ascii_only: bool) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    assert loads(text) == json.loads(text)
    assert normalise(text) == text  # valid JSON has nothing to normalise
    assert decode_value(text + " and some prose", 0) == json.loads(text)


@PROPS
@given(st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4))
def test_valid_objects_read_the_same_through_every_reader(obj: dict[str, Any]) -> None:
    text = json.dumps(obj)
    assert extract_json(text) == obj
    assert decode_arguments("t", text) == obj


SLIPS = [
    ('{"content": "line one\nline two\ttab"}', {"content": "line one\nline two\ttab"}),  # raw control characters
    ('{"a": 1, // the answer\n "b": /* two */ 2}', {"a": 1, "b": 2}),
    ("{'path': 'a.py', 'note': \"it's\", 'q': 'say \"hi\"', 'esc': 'don\\'t'}",
     {"path": "a.py", "note": "it's", "q": 'say "hi"', "esc": "don't"}),
    ('{"a": [1, 2,], "b": {"c": 3,},}', {"a": [1, 2], "b": {"c": 3}}),
    ("{&#34;path&#34;: &#34;src/a.py&#34;, &#34;n&#34;: 1}", {"path": "src/a.py", "n": 1}),
    ("{&quot;note&quot;: &quot;it&#39;s fine&quot;}", {"note": "it's fine"}),
    ('```json\n{"a": 1, // c\n}\n```', {"a": 1}),
    ('{"url": "http://example.com/x", "re": "a//b /* not a comment */"}',
     {"url": "http://example.com/x", "re": "a//b /* not a comment */"}),
]


@pytest.mark.parametrize(("text", "expected"), SLIPS)
def test_a_models_slips_are_read(text: str, expected: dict[str, Any]) -> None:
    assert loads(text) == expected
    assert extract_json(f"Here is my answer:\n{text}\nThat's all.") == expected
    assert decode_arguments("write_file", text) == expected


REFUSED = [
    '{"path": "a.py", "content": "def f(',  # cut off: a truncated file must never be written
    '{"a": [1, 2',
    '{"a": tru}',
    '{a: 1}',
    '{"a": 1 /* unclosed comment',
    "not json at all",
]


@pytest.mark.parametrize("text", REFUSED)
def test_nothing_cut_off_or_guessed_is_accepted(text: str) -> None:
    with pytest.raises(ValueError):
        loads(text)
    with pytest.raises(ToolError) as caught:
        decode_arguments("write_file", text)
    assert caught.value.kind == "invalid_json"
    with pytest.raises(JSONNotFound):
        extract_json(text)


DIMS = [Dim("correctness", 0.6, "It works"), Dim("clarity", 0.4, "It reads well")]


def test_a_review_with_slips_and_stray_spaces_in_names_validates() -> None:
    raw = ("{'scores': [{'dimension': ' correctness', 'score': 4, 'reasoning': 'it&#39;s right,\nline 2',},"
           " {\"dimension\": \"Clarity \", \"score\": \"3.5\", \"reasoning\": \"ok\"}], // done\n"
           " 'summary': 'fine'}")
    sub = validate_submission(extract_json(raw), DIMS)
    assert [(s.dimension, s.score) for s in sub.scores] == [("correctness", 4.0), ("clarity", 3.5)]


def test_leniency_never_lets_an_out_of_range_score_through() -> None:
    raw = "{'scores': [{'dimension': 'correctness', 'score': 7, 'reasoning': 'x'}, " \
          "{'dimension': 'clarity', 'score': 4, 'reasoning': 'y'},], 'summary': 's'}"
    with pytest.raises(ValueError, match="correctness"):
        validate_submission(extract_json(raw), DIMS)


SCORE_ITEMS = st.lists(st.fixed_dictionaries({
    "dimension": st.text(max_size=6), "reasoning": st.text(max_size=12),
    "score": st.integers(1, 5), "evidence": st.lists(st.dictionaries(st.text(max_size=4), st.text(max_size=4),
                                                                     max_size=2), max_size=2)}), min_size=1, max_size=4)


@PROPS
@given(SCORE_ITEMS, st.booleans(), st.data())
def test_a_cut_off_scores_array_gives_exactly_its_complete_objects(
        items: list[dict[str, Any]], ascii_only: bool, data: st.DataObject) -> None:
    """Cut anywhere, the objects read are the ones whose text was whole, in order: never one cut short, never
    one ended by a ``}`` in a string or a nested evidence object."""
    whole = json.dumps({"scores": items, "summary": "s"}, ensure_ascii=ascii_only)
    cut = data.draw(st.integers(0, len(whole)))
    text = whole[:cut]
    ends = [len(json.dumps({"scores": items[:k + 1]}, ensure_ascii=ascii_only)) - len("]}")
            for k in range(len(items))]  # where each object's text ends in the whole reply
    whole_before_cut = sum(end <= cut for end in ends)
    assert complete_items(text, "scores") == items[:whole_before_cut]


def test_a_brace_in_a_reasoning_does_not_end_a_cut_off_object() -> None:
    text = '{"scores": [{"dimension": "a", "reasoning": "x } y", "score": 4}, {"dimension": "b", "reasoning": "z }'
    assert complete_items(text, "scores") == [{"dimension": "a", "reasoning": "x } y", "score": 4}]
    assert complete_items('{"scores": [{"dimension": "a", "evidence": [{"file": "f"}', "scores") == []
    assert complete_items("no array here", "scores") == []
    slips = "{'scores': [{'dimension': 'a', 'score': 4,}, {'dimension': 'b', 'reasoning': 'It loops. It loops."
    assert complete_items(slips.replace("{'scores'", '{"scores"'), "scores") == [{"dimension": "a", "score": 4}]
