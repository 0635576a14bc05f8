"""A review prompt for a small-context judge bounds its own timeline and description, so the rubric and the
instructions reach the model whole and the client's generic trimming has nothing left to cut."""

from __future__ import annotations

from typing import Any

from polpo.llm.context import fit_messages
from polpo.review import prompts
from polpo.review.dimensions import Dim, render_rubric
from polpo.review.reviewer import REVIEW_TOOLS

RUBRIC = render_rubric([Dim("correctness", 0.5, "It works"), Dim("tests", 0.5, "Tested")])
ARGS: dict[str, Any] = {"title": "T", "description": "D" * 9000, "criteria": "C", "attempt": 1,
                        "timeline": "early\n" + "step\n" * 6000 + "LAST LINE", "rubric": RUBRIC,
                        "dim_names": ["correctness", "tests"]}


def test_the_files_review_prompt_keeps_its_rubric_and_fits_a_small_window() -> None:
    big = prompts.review_files_user(**ARGS, files_changed=["a.py"], max_turns=6)
    small = prompts.review_files_user(**ARGS, files_changed=["a.py"], max_turns=6, window=4096)
    assert len(small) < len(big) // 2
    assert RUBRIC in small and small.endswith(big[-300:])  # the rubric and the instructions whole
    assert "LAST LINE" in small and "early" not in small  # the timeline's end is what is kept
    msgs = [{"role": "system", "content": prompts.REVIEW_FILES_SYSTEM}, {"role": "user", "content": small}]
    fitted, _ = fit_messages(msgs, REVIEW_TOOLS.schemas(), 4096, 512)
    assert fitted is msgs  # it fits as written


def test_the_output_review_prompt_too() -> None:
    small = prompts.review_output_user(**ARGS, window=4096)
    assert RUBRIC in small and "LAST LINE" in small and "early" not in small
    msgs = [{"role": "system", "content": prompts.REVIEW_OUTPUT_SYSTEM}, {"role": "user", "content": small}]
    assert fit_messages(msgs, None, 4096, 512)[0] is msgs


def test_without_a_window_the_fixed_bounds_apply() -> None:
    assert prompts.section_limits(None, 12_000) == (prompts.DESCRIPTION_MAX, 12_000)
    assert prompts.section_limits(1_000_000, 12_000) == (prompts.DESCRIPTION_MAX, 12_000)
