"""A review prompt for a small-context judge bounds its own timeline and description, so the rubric and the
instructions reach the model whole and the client's generic trimming has nothing left to cut."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from polpo.llm.context import fit_messages
from polpo.review import prompts
from polpo.review.dimensions import Dim, render_rubric
from polpo.review.evidence import Evidence, render_evidence
from polpo.review.explore import TOOLS_WITH_RUN
from polpo.review.work_files import numbered_files, read_work_files

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
    fitted, _ = fit_messages(msgs, TOOLS_WITH_RUN.schemas(), 4096, 512)
    assert fitted is msgs  # it fits as written (with run_command among the tools)


def test_the_output_review_prompt_too() -> None:
    small = prompts.review_output_user(**ARGS, window=4096)
    assert RUBRIC in small and "LAST LINE" in small and "early" not in small
    msgs = [{"role": "system", "content": prompts.REVIEW_OUTPUT_SYSTEM}, {"role": "user", "content": small}]
    assert fit_messages(msgs, None, 4096, 512)[0] is msgs


def test_without_a_window_the_fixed_bounds_apply() -> None:
    assert prompts.section_limits(None, 12_000) == (prompts.DESCRIPTION_MAX, 12_000)
    assert prompts.section_limits(1_000_000, 12_000) == (prompts.DESCRIPTION_MAX, 12_000)


def big_evidence() -> str:
    """Forty stated examples that each printed a long wrong value, as a work that returns a list may."""
    ev = Evidence()
    for i in range(40):
        ev.add("example", f"stated example: f({i})", i % 2 == 0, f"expected [{i}], got [{', '.join(['7'] * 150)}]",
               "task")
    return render_evidence(ev)


def test_a_long_evidence_block_and_reference_leave_the_rubric_whole_in_a_small_window(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n" * 3000)
    evidence, reference = big_evidence(), "REFERENCE START\n" + "def f(x):\n    return [x]\n" * 800
    assert len(evidence) > 20_000
    extra = {"evidence": evidence, "reference": reference, "framing": "Judge it as a tester would."}
    small = prompts.review_files_user(**ARGS, files_changed=["a.py"], max_turns=6, window=4096, **extra,
                                      shown_files=numbered_files(read_work_files(tmp_path, ["a.py"]), 2048))
    assert RUBRIC in small and small.endswith(prompts.review_files_user(**ARGS, files_changed=["a.py"],
                                                                        max_turns=6)[-300:])
    assert "E1 [PASSED]" in small and "In short: 20 of 40 stated examples passed." in small  # its summary kept
    assert "REFERENCE START" in small and "YOUR ANGLE: Judge it as a tester would." in small
    msgs = [{"role": "system", "content": prompts.REVIEW_FILES_SYSTEM}, {"role": "user", "content": small}]
    assert fit_messages(msgs, TOOLS_WITH_RUN.schemas(), 4096, 512)[0] is msgs
    output = prompts.review_output_user(**ARGS, window=4096, **extra)
    assert RUBRIC in output and "In short: 20 of 40" in output
    msgs = [{"role": "system", "content": prompts.REVIEW_OUTPUT_SYSTEM}, {"role": "user", "content": output}]
    assert fit_messages(msgs, None, 4096, 512)[0] is msgs
    roomy = prompts.review_output_user(**ARGS, **extra)  # no window: the fixed bounds
    assert "E40 [FAILED]" in roomy or "In short" in roomy
