"""What the CLI prints says each thing once, whole words, in one format."""

from __future__ import annotations

from polpo.checks.llm_review import short
from polpo.cli.review_view import assessment_lines
from polpo.console import ConsoleView


def test_a_review_label_is_cut_at_a_word() -> None:
    text = "HAIKU.md is a haiku (5-7-5 syllables) about octopuses, vivid and precise in its imagery"
    label = short(text, 60)
    assert len(label) <= 60 and label.endswith("…") and text.startswith(label[:-1])
    assert text[len(label) - 1] in " ,"  # the cut falls between two words (its comma left out)
    assert short("short  text", 60) == "short text"


def test_a_sentence_every_reviewer_repeats_is_said_once() -> None:
    why = "budget: the next call would exceed the task's budget of $0.01"
    asm = {"status": "complete", "passed": False, "message": why,
           "checks": [{"idx": 0, "type": "llm_review", "label": "good", "passed": False, "message": why}],
           "reviews": [{"check": 0, "reviewer": i, "model": "m", "ok": False, "error": why} for i in range(3)]}
    text = "\n".join(assessment_lines(asm, tiers=False))
    assert text.count(why) == 1, text
    assert text.count("failed: the same") == 3 and text.endswith("verdict: failed — as above")


def test_the_stop_line_has_the_events_format() -> None:
    line = ConsoleView(color=False).note("daemon:stopping", "stopping: no agent is running")
    stamp, rest = line.split("  ", 1)
    assert len(stamp) == 12 and stamp[2] == ":" and rest.startswith("daemon:stopping ")
    assert rest.endswith(" stopping: no agent is running")
