"""A checklist's answers and the dimensions they score (pure), and what a task's author gives the judge besides
the rubric, made ready at the edge (polpo.checks.review_inputs): the reference, scored examples (a list, or a
labels file as ``polpo labels export`` writes it), the checklist's questions and dimensions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from polpo.assessment.label_export import label_lines
from polpo.checks.expectations import LlmReviewExpectation
from polpo.checks.review_inputs import (
    EXAMPLE_CHARS,
    MAX_EXAMPLES,
    REFERENCE_CHARS,
    checklist_dims,
    questions,
    read_examples,
    read_reference,
)
from polpo.review.checklist import derive_scores, parse_answers
from polpo.review.context import Question
from polpo.review.dimensions import Dim

QS = (Question("Does it handle the empty list?", "correctness", 1.0),
      Question("Is every stated example right?", "correctness", 3.0),
      Question("Is it tested?", "tests", 1.0))


def review(**fields: Any) -> LlmReviewExpectation:
    return LlmReviewExpectation.model_validate({"type": "llm_review", **fields})


# ------------------------------------------------------------------------------------------------ answers


def test_answers_are_read_in_the_checklists_order_whatever_order_they_come_in() -> None:
    data = {"answers": [{"question": "Q3", "answer": "No", "evidence": None},
                        {"question": 1, "evidence": "E2 passed", "answer": "yes"},
                        {"question": 2, "answer": " YES "},
                        {"question": 2, "answer": "no"},  # a repeat: the first answer stands
                        {"question": 9, "answer": "no"}]}  # no such question: ignored
    assert parse_answers(data, QS) == [(0, True, "E2 passed"), (1, True, ""), (2, False, "")]


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ({"answers": [{"question": 1, "answer": "yes"}, {"question": 3, "answer": "no"}]},
         "no answer for question(s) 2"),
        ({"answers": [{"question": 1, "answer": "maybe"}]}, "answers: Value error, must be yes or no"),
        ({"answers": [{"question": 1, "answer": True}]}, "must be yes or no"),
        ({"answers": [{"question": 0, "answer": "yes"}]}, "answers: "),
        ({"answers": "yes to all"}, 'the reply has no "answers" list'),
        ([{"question": 1, "answer": "yes"}], 'the reply has no "answers" list'),
    ],
)
def test_a_bad_answer_is_rejected_with_the_reason(data: object, why: str) -> None:
    with pytest.raises(ValueError, match=why.replace("(", r"\(").replace(")", r"\)")):
        parse_answers(data, QS)


def answer(q: Question, p_yes: float, evidence: str = "") -> dict[str, Any]:
    """An answer as answer_checklist stores it (``cited``: its evidence named an item that exists)."""
    return {"question": q.text, "dimension": q.dimension, "answer": "yes" if p_yes >= 0.5 else "no",
            "pYes": p_yes, "fromLogprobs": False, "evidence": evidence, "cited": evidence.startswith("E")}


def test_a_dimensions_score_is_1_plus_4_times_its_weighted_p_yes() -> None:
    dims = [Dim("correctness", 0.7), Dim("tests", 0.3), Dim("style", 0.2)]
    got = derive_scores(dims, QS, [answer(QS[0], 1.0, "E1"), answer(QS[1], 0.0), answer(QS[2], 0.8)])
    assert set(got) == {"correctness", "tests"}  # style has no question: scored on the 1–5 scale as usual
    assert got["correctness"].score == 2.0  # 1 + 4 · (1·1 + 3·0) / 4
    assert got["tests"].score == pytest.approx(4.2)
    assert got["correctness"].cited and not got["tests"].cited  # cited when an answer names its evidence
    assert [q["question"] for q in got["correctness"].from_questions or []] == [QS[0].text, QS[1].text]
    assert "Does it handle the empty list? — yes (E1)" in got["correctness"].reasoning
    assert got["correctness"].to_json()["questions"][0]["pYes"] == 1.0


def test_questions_find_their_dimension_as_scores_do() -> None:
    q = (Question("Tested?", "Unit tests"),)
    assert set(derive_scores([Dim("unit_tests", 1.0)], q, [answer(q[0], 1.0)])) == {"unit_tests"}


def test_no_answers_derive_nothing() -> None:
    assert derive_scores([Dim("correctness", 1.0)], QS, []) == {}


# ------------------------------------------------------------------------------------------------ the checklist


def test_a_checklist_alone_makes_its_own_dimensions_weighted_by_its_questions() -> None:
    exp = review(checklist=["Does it run?", {"question": "Is it tested?", "dimension": "tests", "weight": 2},
                            {"question": "Are the tests fast?", "dimension": "Tests"}])
    qs = questions(exp.checklist)
    assert qs == (Question("Does it run?", "checklist", 1.0), Question("Is it tested?", "tests", 2.0),
                  Question("Are the tests fast?", "Tests", 1.0))
    dims = checklist_dims(qs)
    assert [(d.name, d.weight) for d in dims] == [("checklist", 0.25), ("tests", 0.75)]  # Tests is tests
    assert dims[1].description == "scored by its 2 checklist question(s)"
    assert questions(None) == ()


# ------------------------------------------------------------------------------------------------ reference


def test_a_reference_is_inline_text_or_a_file(tmp_path: Path) -> None:
    (tmp_path / "ref.py").write_text("def add(a, b):\n    return a + b\n")
    outside = tmp_path.parent / f"{tmp_path.name}-secret-ref.txt"
    outside.write_text("expected: 42\n")
    assert read_reference(None, tmp_path) == ""
    assert read_reference("x" * (REFERENCE_CHARS + 5), tmp_path) == "x" * REFERENCE_CHARS
    assert read_reference(review(criteria="c", reference={"file": "ref.py"}).reference, tmp_path).startswith("def add")
    # confined to the workspace: an absolute path, a way out or a link out is not read (inline text is how a
    # reference stays out of the agent's sight)
    (tmp_path / "link.txt").symlink_to(outside)
    for name in (str(outside), f"../{outside.name}", "link.txt"):
        assert read_reference({"file": name}, tmp_path).startswith(f"(the reference file {name} could not be read")
    missing = read_reference({"file": "gone.txt"}, tmp_path)
    assert missing == "(the reference file gone.txt could not be read: it is not a text file in the workspace)"


# ------------------------------------------------------------------------------------------------ examples


def test_examples_given_inline_or_as_files(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text("def f(x):\n    return abs(x)\n")
    exp = review(criteria="c", examples=[{"output": "def f(x): return x", "score": 2, "why": "negatives"},
                                         {"file": "good.py", "score": 5, "task": "Write f"},
                                         {"file": "gone.py", "score": 1}])
    anchors, note = read_examples(exp.examples, tmp_path)
    assert anchors == [{"output": "def f(x): return x", "score": 2.0, "why": "negatives", "task": None},
                       {"output": "def f(x):\n    return abs(x)\n", "score": 5.0, "why": "", "task": "Write f"}]
    assert note is not None and note.startswith("the example file gone.py could not be read")
    assert read_examples(None, tmp_path) == ([], None)


def test_examples_from_a_labels_file_as_polpo_labels_export_writes_it(tmp_path: Path) -> None:
    labels = tmp_path / "labels"
    work = tmp_path / "state" / "workspaces" / "m1"
    (work / "node_modules" / "dep").mkdir(parents=True)
    (work / "node_modules" / "dep" / "index.js").write_text("module.exports = 1\n")  # not the work
    (work / ".git").mkdir()
    (work / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (work / "solution.py").write_text("def below_zero(ops):\n    return False\n" + "# padding\n" * 400)
    labels.mkdir()
    spec = {"tasks": [{"title": "t", "description": "Write below_zero.",
                       "expectations": [{"type": "llm_review", "criteria": "it is right"}]}]}
    rows = [{"spec": json.dumps(spec), "idx": 0, "task_id": "m1:1", "title": "t", "workspace": str(work),
             "score": 1.0, "passed": False, "judge_passed": True, "judge_score": 4.0, "reason": "always False",
             "by_person": "ana", "created_at": "2025-01-01T00:00:00Z"}]
    path = labels / "labels.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in label_lines(rows, labels))
                    + '\n# a comment\n{"output": "x", "score": 9}\nnot json\n{"output": "ok", "score": 4}\n')

    anchors, note = read_examples("labels/labels.jsonl", tmp_path)  # relative to the task's workspace

    assert note is None and len(anchors) == 2  # the score 9 and the broken line are skipped
    first = anchors[0]
    assert (first["score"], first["why"], first["task"]) == (1.0, "always False", "Write below_zero.")
    assert first["output"].startswith("--- solution.py\ndef below_zero(ops):")
    assert "module.exports" not in first["output"] and "refs/heads" not in first["output"]
    assert len(first["output"]) <= EXAMPLE_CHARS + len("--- solution.py\n")
    assert anchors[1] == {"output": "ok", "score": 4.0, "why": "", "task": None}
    assert read_examples(str(path), tmp_path)[0] == []  # an absolute path is not read


def test_a_labels_file_that_cannot_be_read_is_said_so(tmp_path: Path) -> None:
    anchors, note = read_examples("missing.jsonl", tmp_path)
    assert anchors == [] and note is not None and note.startswith("the examples file missing.jsonl could not be read")


def test_at_most_max_examples_anchors(tmp_path: Path) -> None:
    path = tmp_path / "many.jsonl"
    path.write_text("\n".join(json.dumps({"output": f"w{i}", "score": 3}) for i in range(MAX_EXAMPLES + 5)))
    anchors, _ = read_examples("many.jsonl", tmp_path)
    assert len(anchors) == MAX_EXAMPLES
