"""G-Eval's probability-weighted scores from token log-probabilities (polpo.review.geval, polpo.llm.logprobs): the
digit at each ``"score": N`` gives the distribution over 1..5; where it cannot be read for sure, nothing is
guessed and the sampled value stands."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from polpo.llm.logprobs import TokenLogprob, from_response, refuses_logprobs
from polpo.review.consensus import DimScore
from polpo.review.geval import Distribution, answer_distributions, score_distributions


def tok(token: str, top: dict[str, float] | None = None) -> TokenLogprob:
    """A token sampled with ``top`` (token → probability) as its alternatives; certain when none are given."""
    alts = top or {token: 1.0}
    return TokenLogprob(token, math.log(alts.get(token, 1e-9)), tuple((t, math.log(p)) for t, p in alts.items()))


def pieces(*parts: str | TokenLogprob) -> list[TokenLogprob]:
    return [p if isinstance(p, TokenLogprob) else tok(p) for p in parts]


def two_scores(first: TokenLogprob, second: TokenLogprob) -> list[TokenLogprob]:
    return pieces('{"scores": [{"dimension": "a", "score": ', first, '}, {"dimension": "b", "score": ', second,
                  "}]}")


def test_each_score_is_the_mean_of_its_digits_distribution() -> None:
    tokens = two_scores(tok("4", {"4": 0.5, "2": 0.3, "5": 0.2}), tok("3", {"3": 0.9, "4": 0.1}))
    first, second = score_distributions(tokens, [4, 3])
    assert first is not None and second is not None
    assert first.mean == pytest.approx(0.5 * 4 + 0.3 * 2 + 0.2 * 5) and first.mass == pytest.approx(1.0)
    assert second.mean == pytest.approx(3.1)
    assert first.to_json() == {"probs": {"2": 0.3, "4": 0.5, "5": 0.2}, "mass": 1.0}
    assert first.std == pytest.approx(math.sqrt(0.5 * 0.4**2 + 0.3 * 1.6**2 + 0.2 * 1.4**2), abs=1e-4)


def test_tokens_that_are_not_levels_are_left_out_and_the_mass_says_how_much_they_held() -> None:
    (d,) = score_distributions(pieces('{"score": ', tok("4", {"4": 0.6, " 5": 0.2, "x": 0.2}), "}"), [4])
    assert d is not None
    assert d.probs == pytest.approx({4: 0.75, 5: 0.25})  # " 5" with its space is level 5; "x" is no level
    assert d.mass == pytest.approx(0.8)


def test_a_quoted_score_and_a_digit_with_its_space_are_read() -> None:
    (d,) = score_distributions(pieces('{"score": "', tok("2", {"2": 0.7, "1": 0.3}), '"}'), [2])
    assert d is not None and d.mean == pytest.approx(1.7)
    (d,) = score_distributions(pieces('{"score":', tok(" 5", {" 5": 0.8, " 4": 0.2}), "}"), [5])
    assert d is not None and d.mean == pytest.approx(4.8)


def test_no_tokens_means_no_distribution() -> None:
    assert score_distributions(None, [4, 3]) == [None, None]
    assert score_distributions([], [4]) == [None]
    assert answer_distributions(None, [True]) == [None]


def test_a_count_mismatch_reads_none_rather_than_pairing_the_wrong_scores() -> None:
    tokens = two_scores(tok("4", {"4": 0.5, "2": 0.5}), tok("3", {"3": 1.0}))
    assert score_distributions(tokens, [4]) == [None]  # the parsed answer holds one score, the text two
    assert score_distributions(tokens, [4, 3, 5]) == [None, None, None]


def test_a_digit_that_is_not_the_parsed_value_keeps_the_sampled_score() -> None:
    tokens = two_scores(tok("4", {"4": 0.5, "2": 0.5}), tok("3", {"3": 0.6, "1": 0.4}))
    first, second = score_distributions(tokens, [5, 3])
    assert first is None and second is not None and second.mean == pytest.approx(2.2)


def test_a_digit_that_shares_its_token_with_other_text_is_not_read() -> None:
    shared = pieces('{"score":', tok(" 4}", {" 4}": 0.6, " 2}": 0.4}), "]}")
    assert score_distributions(shared, [4]) == [None]  # " 2}" is not a score alone: its alternatives are not levels
    glued = pieces('{"score": ', tok("45", {"45": 1.0}), "}")  # "45" is not "4" then something
    assert score_distributions(glued, [4]) == [None]


def test_the_written_digit_counts_even_when_its_alternatives_leave_it_out() -> None:
    odd = TokenLogprob("4", math.log(0.4), (("four", math.log(0.5)), ("IV", math.log(0.1))))  # 4 not in its top
    (d,) = score_distributions(pieces('{"score": ', odd, "}"), [4])
    assert d is not None and d.probs == {4: 1.0} and d.mass == pytest.approx(0.4)  # most of it went elsewhere
    bare = TokenLogprob("4", -0.2)  # no alternatives given: nothing to weigh it against, the sampled value stands
    assert score_distributions(pieces('{"score": ', bare, "}"), [4]) == [None]


def test_answers_give_p_yes_whatever_their_case() -> None:
    tokens = pieces('{"answers": [{"question": 1, "answer": "', tok("yes", {"yes": 0.8, "no": 0.2}),
                    '"}, {"question": 2, "answer": "', tok("No", {"No": 0.7, "Yes": 0.1, "maybe": 0.2}), '"}]}')
    first, second = answer_distributions(tokens, [True, False])
    assert first == pytest.approx(0.8) and second == pytest.approx(0.125)  # 0.1 / (0.7 + 0.1)
    assert answer_distributions(tokens, [True]) == [None]  # count mismatch
    assert answer_distributions(tokens, [False, False]) == [None, pytest.approx(0.125)]  # the first disagrees


def test_the_distribution_travels_with_the_score() -> None:
    d = Distribution({4: 0.5, 3: 0.5}, 0.9)
    s = DimScore("a", d.mean, "r (a.py:1)", [], sampled=4.0, dist=d.to_json(), cited=True)
    back = DimScore.from_json(s.to_json())
    assert back == s and s.to_json()["dist"] == {"probs": {"3": 0.5, "4": 0.5}, "mass": 0.9}
    assert "dist" not in DimScore("a", 4.0).to_json() and "sampled" not in DimScore("a", 4.0).to_json()


def test_from_response_reads_mappings_and_objects_and_refuses_unknown_shapes() -> None:
    as_dict = {"content": [{"token": "4", "logprob": -0.1, "bytes": [52],
                            "top_logprobs": [{"token": "4", "logprob": -0.1}, {"token": "3", "logprob": -2.5}]}]}
    (t,) = from_response(as_dict) or []
    assert (t.token, t.logprob, t.top) == ("4", -0.1, (("4", -0.1), ("3", -2.5)))
    as_object = SimpleNamespace(content=[SimpleNamespace(token="x", logprob=-1.0, top_logprobs=None)])
    assert from_response(as_object) == [TokenLogprob("x", -1.0)]
    assert from_response(None) is None and from_response({"content": []}) is None
    assert from_response({"content": [{"token": 4, "logprob": -1}]}) is None  # a shape we do not know
    assert from_response({"content": [{"token": "4", "logprob": float("nan")}]}) is None
    assert TokenLogprob.from_json(t.to_json()) == t


def test_a_refusal_for_logprobs_is_told_from_other_refusals() -> None:
    assert refuses_logprobs("BadRequestError: logprobs are not supported by this server")
    assert refuses_logprobs("'top_logprobs' is not permitted for this model")
    assert not refuses_logprobs("BadRequestError: the prompt is too long")
