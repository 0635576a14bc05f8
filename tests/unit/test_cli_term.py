"""``term`` (the CLI's text for a terminal) escapes exactly as the event pipeline + renderer would, without
importing them: the CLI keeps its own copy of the surrogate escaping so quick commands do not load pydantic."""

from __future__ import annotations

from polpo.cli.common import term
from polpo.events.pipeline import json_safe_text
from polpo.events.render import safe

HOSTILE = ["plain", "a\x00b", "x\ud800y", "\udfff", "\x1b[2J\x1b]0;title\x07", "line\nforged", "tab\there\r",
           "é ü 中文 \u2028\u2029", "\x7f\x9b", "\\x00 already escaped", "", 42, None]


def test_term_escapes_like_the_event_pipeline_and_renderer() -> None:
    for value in HOSTILE:
        assert term(value) == safe(json_safe_text(str(value))), repr(value)


def test_term_output_has_no_control_characters_and_encodes_as_utf8() -> None:
    for value in HOSTILE:
        out = term(value)
        out.encode("utf-8")
        assert not any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in out), repr(value)
    assert term("line\nforged") == "line\\nforged" and term("x\ud800y") == "x\\ud800y"
