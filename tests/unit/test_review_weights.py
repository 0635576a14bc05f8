"""What a vote is worth (pure): a score that cites no evidence weighs half in its dimension's weighted median, a
failed reviewer's vote never outweighs a real one, and a critical dimension below the threshold caps the global
score; and :func:`polpo.review.citations.cites`, which decides what counts as citing evidence."""

from __future__ import annotations

import statistics

import pytest

from polpo.review.citations import cites
from polpo.review.consensus import UNCITED_WEIGHT, DimScore, Review, consensus, robust_median, weighted_median
from polpo.review.dimensions import DEFAULT_DIMENSIONS, Dim, validate_generated

ONE = [Dim("quality", 1.0)]


def vote(reviewer: int, score: float, cited: bool | None) -> Review:
    return Review(reviewer, [DimScore("quality", score, f"r{reviewer}", cited=cited)])


# ------------------------------------------------------------------------------------------------ the median


@pytest.mark.parametrize(
    ("values", "weights", "median"),
    [
        ([2, 4, 5], [1, 1, 1], 4.0),
        ([3, 4], [1, 1], 3.5),  # equal weights: statistics.median exactly, the mean of the middle two
        ([2, 4, 4], [1, 0.5, 0.5], 3.0),  # the 2 holds half the weight alone: between it and the next
        ([4, 2, 4], [0.5, 1, 0.5], 3.0),  # the order given does not matter
        ([2, 4, 5], [0.5, 1, 1], 4.0),
        ([2, 4], [1, 0.5], 2.0),  # the heavier vote decides
        ([2, 4], [0.5, 1], 4.0),
        ([5], [0.5], 5.0),  # alone, an uncited vote is the verdict
        ([1, 2, 3], [0.5, 0.5, 1], 2.5),
    ],
)
def test_weighted_median(values: list[float], weights: list[float], median: float) -> None:
    assert weighted_median(values, weights) == median


def test_equal_weights_keep_every_unweighted_verdict() -> None:
    for values in ([1, 3, 5], [1, 2, 5], [4.5, 4, 1], [1, 5], [3]):
        assert weighted_median(values, [UNCITED_WEIGHT] * len(values)) == statistics.median(values)
        assert robust_median(values, [UNCITED_WEIGHT] * len(values)) == robust_median(values)


# ------------------------------------------------------------------------------------------------ evidence


def test_an_uncited_vote_weighs_half_and_is_marked() -> None:
    c = consensus([vote(0, 2, True), vote(1, 4, False), vote(2, 4, False)], ONE, 3.0)
    assert c is not None
    (d,) = c.scores
    assert d.score == 3.0  # unweighted, the two uncited 4s would make it 4
    assert [(v["reviewer"], v.get("uncited", False)) for v in d.reviewer_scores] == [(0, False), (1, True), (2, True)]
    assert c.passed


def test_unchecked_votes_weigh_as_cited_ones() -> None:
    c = consensus([vote(0, 2, None), vote(1, 4, None), vote(2, 4, None)], ONE, 3.0)
    assert c is not None and c.scores[0].score == 4.0  # cited None: not checked, a full vote


def test_a_seat_counts_as_cited_when_any_of_its_samples_cites() -> None:
    reviews = [Review(0, [DimScore("quality", 2, cited=True)], voter=0),
               Review(1, [DimScore("quality", 4, cited=False)], voter=1),
               Review(3, [DimScore("quality", 4, cited=True)], voter=1),  # seat 1's second sample cites
               Review(2, [DimScore("quality", 5, cited=False)], voter=2)]
    c = consensus(reviews, ONE, 3.0)
    assert c is not None
    assert [v.get("uncited", False) for v in c.scores[0].reviewer_scores] == [False, False, True]


@pytest.mark.parametrize(
    ("cited", "crashes", "final"),
    [
        ((False, False), 1, 4.0),  # two uncited 4s still outvote one failed reviewer's 1
        ((True, True), 1, 4.0),
        ((False,), 2, 1.0),  # one real vote and two failed reviewers: they are the majority
        ((True,), 2, 1.0),
    ],
)
def test_a_crash_vote_never_outweighs_a_real_vote(cited: tuple[bool, ...], crashes: int, final: float) -> None:
    reviews = [vote(i, 4, c) for i, c in enumerate(cited)]
    c = consensus(reviews, ONE, 3.0, crashed=list(range(len(cited), len(cited) + crashes)), fail_vote=True)
    assert c is not None and c.scores[0].score == final


# ------------------------------------------------------------------------------------------------ critical


def test_a_critical_dimension_below_the_threshold_caps_the_global_score() -> None:
    scores = {"correctness": 2, "completeness": 4, "code_quality": 5, "edge_cases": 4}
    c = consensus([Review(0, [DimScore(n, s) for n, s in scores.items()])], DEFAULT_DIMENSIONS, 3.0)
    assert c is not None
    assert c.global_score == 2.0 and c.capped_by == ["correctness"] and not c.passed  # weighted: 3.55, a pass
    assert c.to_json()["cappedBy"] == ["correctness"]


def test_a_critical_dimension_at_the_threshold_caps_nothing() -> None:
    scores = {"correctness": 3, "completeness": 2, "code_quality": 5, "edge_cases": 5}
    c = consensus([Review(0, [DimScore(n, s) for n, s in scores.items()])], DEFAULT_DIMENSIONS, 3.0)
    assert c is not None and c.capped_by == [] and c.global_score == pytest.approx(0.35 * 3 + 0.3 * 2 + 0.35 * 5)


def test_no_critical_dimension_no_cap() -> None:
    dims = [Dim("a", 0.5), Dim("b", 0.5)]
    c = consensus([Review(0, [DimScore("a", 1), DimScore("b", 5)])], dims, 3.0)
    assert c is not None and c.global_score == 3.0 and c.capped_by == [] and c.passed


def test_a_generated_rubric_keeps_one_critical_dimension_the_heaviest() -> None:
    dims = validate_generated({"dimensions": [
        {"name": "a", "description": "x", "weight": 1, "critical": True},
        {"name": "b", "description": "y", "weight": 3, "critical": "true"},
        {"name": "c", "description": "z", "weight": 1, "critical": "no"}]})
    assert [(d.name, d.critical) for d in dims] == [("a", False), ("b", True), ("c", False)]


# ------------------------------------------------------------------------------------------------ citations


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("E2 shows below_zero([1, 2, -4, 5]) returns False", True),  # an evidence item that exists
        ("as E9 shows", False),  # one that does not
        ("the loop at solution.py:14 stops early", True),  # a file:line
        ("see lines 3-5 of the function", False),  # two files: which one's lines?
        ("solution.py handles the empty list", True),  # a file of the work, by name
        ("src/pkg/solution.py is tidy", True),
        ("the output `balance fell below zero` is what was asked", True),  # quotes the work's output
        ('it printed "done" twice', False),  # too short a quote to be evidence
        ("the code looks correct and well structured", False),
        ("E12", False),
        ("", False),
    ],
)
def test_what_counts_as_citing_evidence(text: str, expected: bool) -> None:
    assert cites(text, evidence_ids={"E1", "E2"}, files=["src/pkg/solution.py", "solution.py"],
                 output="agent ran\nbalance fell below zero at step 3\n") is expected


def test_a_quote_that_is_not_in_the_output_is_no_evidence() -> None:
    assert not cites('it prints "the balance is fine"', evidence_ids=set(), files=[], output="nothing like it")
    assert not cites("E1", evidence_ids=set(), files=[])
