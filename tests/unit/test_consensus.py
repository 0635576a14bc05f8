"""Median consensus (pure): table tests, reasoning choice, missing dimensions, global score, properties."""

from __future__ import annotations

import itertools
import random
import statistics

import pytest

from polpo.review.consensus import (
    OUTLIER_DISTANCE,
    DimScore,
    Review,
    consensus,
    robust_median,
    weighted_score,
)
from polpo.review.dimensions import DEFAULT_DIMENSIONS, Dim

ONE = [Dim("quality", 1.0)]


def reviews_for(scores: list[float], dim: str = "quality") -> list[Review | None]:
    return [Review(i, [DimScore(dim, s, reasoning=f"r{i} says {s:g}")]) for i, s in enumerate(scores)]


@pytest.mark.parametrize(
    ("votes", "final"),
    [
        ([2, 4, 5], 4.5),  # 2 is an outlier of median 4; median of [4, 5]; not rounded (Polpo: 5)
        ([1, 3, 5], 3.0),
        ([3, 3, 5], 3.0),
        ([1, 2, 5], 1.5),  # Polpo: 2
        ([4, 5, 5], 5.0),
        ([1, 1, 4], 1.0),
        ([3, 4], 3.5),
        ([2, 3], 2.5),
        ([1, 5], 3.0),  # both 2 away from the median 3: dropping everything keeps everything
        ([3], 3.0),
        ([4.5, 4, 1], 4.25),
        ([2.5, 4, 4], 4.0),  # |2.5 - 4| = 1.5 is not *more* than 1.5: kept, median stays 4
    ],
)
def test_consensus_table(votes: list[float], final: float) -> None:
    c = consensus(reviews_for(votes), ONE, 3.0)
    assert c is not None
    (d,) = c.scores
    assert d.score == final
    assert c.global_score == final


def test_2_4_5_comes_out_above_4_and_drops_the_2() -> None:
    c = consensus(reviews_for([2, 4, 5]), ONE, 4.5)
    assert c is not None
    (d,) = c.scores
    assert d.score > 4
    assert d.median == 4
    assert [v["kept"] for v in d.reviewer_scores] == [False, True, True]
    assert c.passed  # 4.5 >= 4.5


def test_reasoning_from_nearest_kept_vote_lower_score_on_tie() -> None:
    c = consensus(reviews_for([2, 4, 5]), ONE, 3.0)
    assert c is not None
    assert c.scores[0].from_reviewer == 1  # 4 and 5 are both 0.5 from 4.5: the lower score explains the gaps
    assert c.scores[0].reasoning == "r1 says 4"
    c = consensus(reviews_for([1, 2, 5]), ONE, 3.0)
    assert c is not None and c.scores[0].reasoning == "r0 says 1"
    c = consensus(reviews_for([5, 3, 3]), ONE, 3.0)
    assert c is not None and c.scores[0].from_reviewer == 1  # first of the equal "3"s, never the dropped 5


def test_evidence_travels_with_the_chosen_reasoning() -> None:
    ev = [{"file": "a.py", "line": 3, "note": "bug"}]
    reviews: list[Review | None] = [Review(0, [DimScore("quality", 2, "meh", ev)]),
                                    Review(1, [DimScore("quality", 2, "meh too", [])]),
                                    Review(2, [DimScore("quality", 5, "great", [])])]
    c = consensus(reviews, ONE, 3.0)
    assert c is not None
    assert c.scores[0].score == 2
    assert c.scores[0].evidence == ev


def test_failed_reviewers_excluded_and_single_flagged() -> None:
    c = consensus([None, Review(1, [DimScore("quality", 4)]), None], ONE, 3.0)
    assert c is not None
    assert c.single_reviewer and c.reviewers == [1]
    assert c.scores[0].score == 4 and c.passed
    c = consensus([None, Review(1, [DimScore("quality", 4)]), Review(2, [DimScore("quality", 2)])], ONE, 3.0)
    assert c is not None and not c.single_reviewer and c.reviewers == [1, 2]
    assert c.scores[0].score == 3


def test_no_successful_reviewer_no_consensus() -> None:
    assert consensus([None, None, None], ONE, 3.0) is None
    assert consensus([], ONE, 3.0) is None


def test_missing_dimension_uses_the_other_reviewers() -> None:
    dims = [Dim("a", 0.5), Dim("b", 0.5)]
    reviews: list[Review | None] = [
        Review(0, [DimScore("a", 4), DimScore("b", 2)]),
        Review(1, [DimScore("a", 4)]),  # did not score b
        Review(2, [DimScore("a", 5), DimScore("b", 3)]),
    ]
    c = consensus(reviews, dims, 3.0)
    assert c is not None
    by = {s.dimension: s for s in c.scores}
    assert by["a"].score == 4
    assert by["b"].score == 2.5 and [v["reviewer"] for v in by["b"].reviewer_scores] == [0, 2]
    assert c.unscored == []


def test_dimension_nobody_scored_fails_the_check() -> None:
    dims = [Dim("a", 0.5), Dim("b", 0.5)]
    c = consensus([Review(0, [DimScore("a", 5)]), Review(1, [DimScore("a", 5)])], dims, 3.0)
    assert c is not None
    assert c.unscored == ["b"]
    assert c.global_score == 5  # over the scored dimensions only
    assert not c.passed


def test_names_matched_loosely_unknown_ignored_repeats_first_wins() -> None:
    dims = [Dim("code_quality", 1.0)]
    reviews: list[Review | None] = [
        Review(0, [DimScore("Code Quality", 4), DimScore("vibes", 1)]),
        Review(1, [DimScore("code-quality", 4), DimScore("code_quality", 1)]),
    ]
    c = consensus(reviews, dims, 3.0)
    assert c is not None
    assert [s.dimension for s in c.scores] == ["code_quality"]
    assert c.scores[0].score == 4


def test_all_threes_pass_threshold_three_exactly() -> None:
    reviews: list[Review | None] = [Review(i, [DimScore(d.name, 3) for d in DEFAULT_DIMENSIONS]) for i in range(3)]
    c = consensus(reviews, DEFAULT_DIMENSIONS, 3.0)
    assert c is not None
    assert c.global_score == 3.0 and c.passed


def test_threshold_compared_unrounded() -> None:
    dims = [Dim("a", 0.35), Dim("b", 0.65)]
    reviews: list[Review | None] = [Review(0, [DimScore("a", 3), DimScore("b", 3)]),
                                    Review(1, [DimScore("a", 2), DimScore("b", 3)])]
    c = consensus(reviews, dims, 3.0)
    assert c is not None
    assert c.scores[0].score == 2.5
    assert c.global_score == pytest.approx(2.825)
    assert not c.passed


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        ([(4, 0.5), (2, 0.5)], 3.0),
        ([(5, 0.8), (1, 0.2)], 4.2),
        ([(10, 0.5), (-3, 0.5)], 3.0),  # clamped to 5 and 1
        ([(4, 0.0)], 0.0),
        ([], 0.0),
        ([(3, 1.0)], 3.0),
        ([(4, 2.0), (2, 2.0)], 3.0),  # weights need not sum to 1
    ],
)
def test_weighted_score(pairs: list[tuple[float, float]], expected: float) -> None:
    assert weighted_score(pairs) == pytest.approx(expected)


def test_robust_median_rejects_empty() -> None:
    with pytest.raises(ValueError):
        robust_median([])


def test_to_json_shape() -> None:
    c = consensus(reviews_for([2, 4, 5]), ONE, 3.0)
    assert c is not None
    data = c.to_json()
    assert data["globalScore"] == 4.5 and data["passed"] is True
    assert data["scores"][0]["reviewerScores"][0] == {"reviewer": 0, "score": 2, "kept": False,
                                                      "why": "2 from the median 4 (more than 1.5)"}


# --------------------------------------------------------------------------------------------- properties


def test_properties_over_random_panels() -> None:
    """hypothesis is not a dependency: a seeded loop over random panels checks the invariants instead."""
    rng = random.Random(20240611)
    dims = [Dim("a", 0.4), Dim("b", 0.35), Dim("c", 0.25)]
    for _ in range(1500):
        n = rng.randint(1, 3)
        half_points = rng.random() < 0.5
        reviews: list[Review | None] = []
        for i in range(n):
            if rng.random() < 0.2:
                reviews.append(None)
                continue
            scores = []
            for d in dims:
                if rng.random() < 0.1:
                    continue  # a reviewer that skipped a dimension
                s = rng.choice([1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5]) if half_points else round(rng.uniform(1, 5), 3)
                scores.append(DimScore(d.name, s, f"r{i}"))
            reviews.append(Review(i, scores))
        threshold = rng.choice([2.5, 3.0, 3.5, 4.0])
        c = consensus(reviews, dims, threshold)
        ok = [r for r in reviews if r is not None]
        if not ok:
            assert c is None
            continue
        assert c is not None
        assert c.single_reviewer == (len(ok) == 1)
        for res in c.scores:
            votes = [v["score"] for v in res.reviewer_scores]
            kept = [v["score"] for v in res.reviewer_scores if v["kept"]]
            assert votes and kept
            assert min(votes) <= res.score <= max(votes)
            assert 1 <= res.score <= 5
            assert res.median == statistics.median(votes)
            assert abs(res.score - res.median) <= OUTLIER_DISTANCE
            assert res.score == statistics.median(kept)
            # the shown reasoning belongs to a kept vote, and no kept vote is nearer the final score
            chosen = next(v for v in res.reviewer_scores if v["reviewer"] == res.from_reviewer)
            assert chosen["kept"]
            assert all(abs(chosen["score"] - res.score) <= abs(k - res.score) for k in kept)
            if len(votes) == 3:
                for a, b in itertools.combinations(votes, 2):
                    if a == b:  # two reviewers agree: that is the consensus
                        assert res.score == a
            if len(set(votes)) == 1:
                assert res.score == votes[0]
        if c.scores:
            finals = [s.score for s in c.scores]
            assert min(finals) - 1e-9 <= c.global_score <= max(finals) + 1e-9
        assert c.passed == (bool(c.scores) and not c.unscored and c.global_score >= threshold)
        # the order of the reviewers does not matter
        shuffled = list(reviews)
        rng.shuffle(shuffled)
        c2 = consensus(shuffled, dims, threshold)
        assert c2 is not None
        assert [s.score for s in c2.scores] == [s.score for s in c.scores]
        assert c2.global_score == c.global_score


# ------------------------------------------------------------------------------ reviewer_error: 0 to 3 votes


@pytest.mark.parametrize(("ok", "policy", "final", "crash_votes"), [
    ([4, 4, 4], "abstain", 4.0, 0),     # 3 votes: robust median
    ([4, 4, 4], "fail", 4.0, 0),
    ([4, 5], "abstain", 4.5, 0),        # 2 votes: their mean
    ([4, 5], "fail", 4.5, 1),           # [4, 5, 1]: median 4, the crash's 1 is an outlier: median of [4, 5]
    ([4], "abstain", 4.0, 0),           # 1 vote: used as it is
    ([4], "fail", 1.0, 2),              # [4, 1, 1]: the two crashes are the majority
    ([], "abstain", None, 0),           # 0 votes: no consensus (an error), whatever the policy
    ([], "fail", None, 0),
])
def test_votes_by_policy(ok: list[float], policy: str, final: float | None, crash_votes: int) -> None:
    reviews = [Review(i, [DimScore("quality", s)]) for i, s in enumerate(ok)]
    crashed = list(range(len(ok), 3))
    c = consensus(reviews, ONE, 3.0, crashed=crashed, fail_vote=policy == "fail")
    if final is None:
        assert c is None
        return
    assert c is not None and c.scores[0].score == final
    assert sum(1 for v in c.scores[0].reviewer_scores if v.get("crashed")) == crash_votes
    assert c.single_reviewer == (len(ok) == 1)


def test_samples_of_one_seat_vote_once_with_their_median() -> None:
    reviews = [Review(0, [DimScore("quality", 2)], voter=0), Review(3, [DimScore("quality", 4)], voter=0),
               Review(1, [DimScore("quality", 4)], voter=1), Review(4, [DimScore("quality", 4)], voter=1),
               Review(2, [DimScore("quality", 5)], voter=2), Review(5, [DimScore("quality", 5)], voter=2)]
    c = consensus(reviews, ONE, 3.0)
    assert c is not None
    d = c.scores[0]
    assert [(v["reviewer"], v["score"]) for v in d.reviewer_scores] == [(0, 3.0), (1, 4.0), (2, 5.0)]
    assert d.score == 4.0 and d.reviewer_scores[0]["samples"] == [2, 4]
    assert d.spread == {"mean": 4.0, "median": 4.0, "std": pytest.approx(1.0), "votes": [2, 4, 4, 4, 5, 5]}
