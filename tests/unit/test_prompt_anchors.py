"""No prompt shows an example value a model could copy into its verdict (issue 32: the JSON scorer's template
showed ``"score": 3`` for every dimension, and Qwen2.5-Coder-1.5B wrote 3 for six of ten broken functions).

Every prompt the review panel, the dimension generator, the checklist, the pairwise comparison and the
expectation judge send is rendered with sample inputs that hold no such value themselves, so whatever matches
comes from the template. The shapes they ask for must use ``<…>`` placeholders (or the schema alone)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from polpo.review import pairwise, prompts, score_prompts
from polpo.review.dimensions import DEFAULT_DIMENSIONS, Dim, render_rubric
from polpo.review.evidence import Evidence, render_evidence
from polpo.review.explore import TOOLS_WITH_RUN
from polpo.review.scoring import render_anchors

#: A value a model could copy: a score or weight given as a number, a verdict, an answer, a flag, a pick.
ANCHORS: dict[str, re.Pattern[str]] = {
    "score": re.compile(r"""["']score["']\s*:\s*["']?\s*[0-9]"""),
    "weight": re.compile(r"""["']weight["']\s*:\s*["']?\s*[0-9]"""),
    "verdict": re.compile(r"""["']verdict["']\s*:\s*["']"""),
    "answer": re.compile(r"""["']answer["']\s*:\s*["']?\s*(yes|no|true|false)""", re.IGNORECASE),
    "critical": re.compile(r"""["']critical["']\s*:\s*["']?(true|false)""", re.IGNORECASE),
    "better": re.compile(r"""["']better["']\s*:\s*["']"""),
    "passed": re.compile(r"""["']passed["']\s*:\s*["']?(true|false)""", re.IGNORECASE),
}

NAMES = ["correctness", "edge_cases"]
DIMS = [*DEFAULT_DIMENSIONS, Dim("edge_cases", 0.2, "Empty input and negatives are handled", critical=True)]
RUBRIC = render_rubric(DIMS)
EVIDENCE = Evidence()
EVIDENCE.add("check", "test check: pytest -q", False, "exit code 1\n    output (end): 1 failed, 3 passed")
EVIDENCE.add("example", "stated example: below_zero([1, 2, -4, 5])", False, "expected True, got False", "task")
EVIDENCE.add("load", "a file of the work failed to load", False, "solution.py: SyntaxError: invalid syntax")
EVIDENCE.add("note", "the stated examples could not be run: the time limit", None)
SHOWN = render_evidence(EVIDENCE)
ANCHOR_EXAMPLES = render_anchors([{"output": "def f(x): return x", "score": 4.0, "why": "misses negatives",
                                   "task": "Write f"}])
TITLE, DESCRIPTION = "Below zero", "Write below_zero(ops) → True when the balance falls below 0."
CRITERIA = "It is right on every stated example."
TASK: dict[str, Any] = {"title": TITLE, "description": DESCRIPTION, "criteria": CRITERIA, "attempt": 2}
WORK = {"files": {"solution.py": "def below_zero(ops):\n    return False\n"}, "output": "",
        "evidence": "1 of 3 stated examples passed"}
FAILED = [{"index": 0, "type": "test", "message": "exit code 1", "details": "1 failed"},
          {"index": 1, "type": "llm_review", "message": "Score 2.4/5"}]
EXPECTATIONS = [{"type": "test", "command": "pytest -q"}, {"type": "llm_review", "criteria": "it is right"}]

#: every prompt text, by the module attribute that builds it
PROMPTS: dict[str, Callable[[], str]] = {
    "prompts.DIMENSIONS_SYSTEM": lambda: prompts.DIMENSIONS_SYSTEM,
    "prompts.dimensions_user": lambda: prompts.dimensions_user(TITLE, DESCRIPTION, CRITERIA),
    "prompts.REVIEW_FILES_SYSTEM": lambda: prompts.REVIEW_FILES_SYSTEM,
    "prompts.review_files_user": lambda: prompts.review_files_user(
        **TASK, files_changed=["solution.py"], timeline="agent ran; exit 0", rubric=RUBRIC, dim_names=NAMES,
        max_turns=8, evidence=SHOWN, shown_files="--- solution.py\n   1| def below_zero(ops):",
        reference="def below_zero(ops):\n    ...", framing="Judge it as a tester would."),
    "prompts.REVIEW_OUTPUT_SYSTEM": lambda: prompts.REVIEW_OUTPUT_SYSTEM,
    "prompts.review_output_user": lambda: prompts.review_output_user(
        **TASK, timeline="agent printed its answer", rubric=RUBRIC, dim_names=NAMES, evidence=SHOWN,
        reference="the expected answer", framing="Judge it as the person who asked for it."),
    "prompts.wrap_up": lambda: prompts.wrap_up(5),
    "prompts.final_turn": lambda: prompts.final_turn(NAMES),
    "prompts.JUDGE_SYSTEM": lambda: prompts.JUDGE_SYSTEM,
    "prompts.judge_user": lambda: prompts.judge_user(
        title=TITLE, description=DESCRIPTION, agent_output="done", failed=FAILED,
        expectations=EXPECTATIONS, files_changed=["solution.py"]),
    "score_prompts.SCORING_SYSTEM": lambda: score_prompts.SCORING_SYSTEM,
    "score_prompts.scoring_user": lambda: score_prompts.scoring_user(
        analysis="correctness: wrong on E2. edge_cases: none handled (solution.py:2).", rubric=RUBRIC,
        dim_names=NAMES, evidence=SHOWN, anchors=ANCHOR_EXAMPLES),
    "score_prompts.score_shape": lambda: score_prompts.score_shape(NAMES),
    "score_prompts.retry_scoring": lambda: score_prompts.retry_scoring("scores.0.score: outside 1..5", NAMES),
    "score_prompts.ask_evidence": lambda: score_prompts.ask_evidence(NAMES),
    "score_prompts.finish_scoring": lambda: score_prompts.finish_scoring(NAMES[:1], NAMES[1:]),
    "score_prompts.submit_review_tool": lambda: json.dumps(score_prompts.submit_review_tool(NAMES)),
    "score_prompts.CHECKLIST_SYSTEM": lambda: score_prompts.CHECKLIST_SYSTEM,
    "score_prompts.checklist_user": lambda: score_prompts.checklist_user(
        analysis="it returns False always", evidence=SHOWN, questions=["Is every stated example right?"]),
    "pairwise.PAIRWISE_SYSTEM": lambda: pairwise.PAIRWISE_SYSTEM,
    "pairwise.pairwise_user": lambda: pairwise.pairwise_user(
        title=TITLE, description=DESCRIPTION, criteria=CRITERIA, a=WORK, b=WORK),
    "explore tools": lambda: json.dumps(TOOLS_WITH_RUN.schemas()),
}

#: the prompt-building names each module exports (systems, user prompts, turns, shapes, tools)
MODULES: dict[str, ModuleType] = {"prompts": prompts, "score_prompts": score_prompts, "pairwise": pairwise}
NOT_PROMPTS = {"head", "tail", "DEFAULT_CRITERIA", "ANALYSIS_MAX", "SUBMIT_REVIEW", "DIGEST_CHARS", "Pairwise",
               "combine", "compare", "work_digest"}

# the template json_scorer_user sent before issue 32 (kept here to prove the check catches it)
OLD_JSON_SCORER = ('Reply with exactly this JSON shape, one entry per dimension, each score a number from 1 to 5:\n'
                   + json.dumps({"scores": [{"dimension": n, "score": 3, "reasoning": "…",
                                             "evidence": [{"file": "path/to/file", "line": 1, "note": "…"}]}
                                            for n in NAMES], "summary": "…", "suggestions": ["…"]},
                                ensure_ascii=False))
OLD_JUDGE_SHAPE = json.dumps({"corrections": [{"index": 0, "verdict": "expectation_wrong", "reason": "…",
                                               "fix": {"command": "npm test"}}]})
OLD_DIMENSIONS_SHAPE = '{"dimensions": [{"name": "api_design", "weight": 0.4, "critical": true}]}'


def anchors_in(text: str) -> list[str]:
    return [f"{kind}: {m.group(0)!r}" for kind, pattern in ANCHORS.items() for m in pattern.finditer(text)]


@pytest.mark.parametrize("name", sorted(PROMPTS))
def test_no_prompt_shows_a_value_to_copy(name: str) -> None:
    text = PROMPTS[name]()
    assert text.strip(), f"{name} rendered nothing"
    assert anchors_in(text) == [], f"{name} shows example values a model could copy: {anchors_in(text)}"


def test_every_prompt_the_modules_export_is_rendered_here() -> None:
    exported = {f"{m}.{n}" for m, module in MODULES.items() for n in module.__all__ if n not in NOT_PROMPTS}
    assert exported <= set(PROMPTS), f"add these to PROMPTS: {sorted(exported - set(PROMPTS))}"


def test_the_check_catches_the_templates_issue_32_found() -> None:
    assert anchors_in(OLD_JSON_SCORER) == ["score: '\"score\": 3'"] * 2
    assert anchors_in(OLD_JUDGE_SHAPE) == ["verdict: '\"verdict\": \"'"]
    assert [a.split(":")[0] for a in anchors_in(OLD_DIMENSIONS_SHAPE)] == ["weight", "critical"]
    assert anchors_in('{"answers": [{"question": 1, "answer": "yes"}]}') == ["answer: '\"answer\": \"yes'"]


def test_the_shapes_ask_with_placeholders() -> None:
    shape = score_prompts.score_shape(NAMES)
    assert '"score": <a whole number from 1 to 5' in shape and "<one of: correctness, edge_cases>" in shape
    assert '"answer": <yes or no>' in PROMPTS["score_prompts.checklist_user"]()
    assert '"weight": <a positive number' in PROMPTS["prompts.dimensions_user"]()
    assert '"verdict": <one of: expectation_wrong' in PROMPTS["prompts.judge_user"]()
