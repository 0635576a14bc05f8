"""The fitted decision rule (polpo.review.rule): its thresholds, decisions, counts and confidence bound, checked
against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from polpo.review.rule import (
    Features,
    Rule,
    apply_rule,
    clopper_pearson_upper,
    fit_rule,
    labels_needed,
    no_rule_reason,
    report_rule,
)

# ten broken items and ten good ones; one broken item scores high but polpo's own evidence contradicts it
BROKEN = [Features(s) for s in (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 3.5, 4.0, 4.5)] + [Features(4.8, contradicted=True)]
GOOD = [Features(s) for s in (2.5, 3.0, 3.5, 4.0, 4.2, 4.5, 4.6, 4.8, 5.0, 5.0)]
ITEMS = [(f, False) for f in BROKEN] + [(f, True) for f in GOOD]


def test_labels_needed_for_a_bound_with_none_passing() -> None:
    # (1 - p)^n ≤ 0.05: n ≥ ln 0.05 / ln(1 - p)
    assert labels_needed(0.05) == 59 and labels_needed(0.1) == 29
    assert clopper_pearson_upper(0, 29) == pytest.approx(0.0982, abs=1e-4)  # 29 is enough for 0.1 …
    assert (clopper_pearson_upper(0, 28) or 0) > 0.1  # … and 28 is not


def test_the_upper_bound_matches_the_closed_form_and_grows_with_passes() -> None:
    for n in (1, 10, 100):
        assert clopper_pearson_upper(0, n) == pytest.approx(1 - 0.05 ** (1 / n), abs=1e-4)
    assert clopper_pearson_upper(0, 0) is None and clopper_pearson_upper(3, 3) == 1.0
    bounds = [clopper_pearson_upper(k, 20) or 0.0 for k in range(3)]
    assert 0 < bounds[0] < bounds[1] < bounds[2]
    # a bound far past math.comb's float range still computes
    assert clopper_pearson_upper(10, 5000) == pytest.approx(0.0034, abs=2e-4)


def test_pass_at_lets_through_at_most_the_allowed_broken_items_and_a_contradicted_one_does_not_count() -> None:
    rule = fit_rule(ITEMS, max_false_pass=0.1, max_false_fail=0.2)
    # 10 broken at 0.1: one may pass. The lowest cut with one uncontradicted broken score at or above it is 4.1
    # (the midpoint of 4.0 and 4.2; 4.5 is above it); 4.8 is contradicted and goes to a person at any score
    assert rule.pass_at == pytest.approx(4.1)
    # 10 good at 0.2: two may fail: goods under 3.25 are 2.5 and 3.0 → fail below 3.25
    assert rule.fail_below == pytest.approx(3.25)
    strict = fit_rule(ITEMS, max_false_pass=0.0, max_false_fail=0.0)
    assert strict.pass_at == pytest.approx(4.55) and strict.fail_below == pytest.approx(2.25)


def test_the_decisions_and_their_counts() -> None:
    rule = Rule(pass_at=4.0, fail_below=3.0, max_false_pass=0.1, max_false_fail=0.2)
    assert apply_rule(rule, Features(4.0))[0] == "pass"
    assert apply_rule(rule, Features(2.99))[0] == "fail"
    assert apply_rule(rule, Features(3.5))[0] == "person"
    decision, why = apply_rule(rule, Features(5.0, contradicted=True))
    assert decision == "person" and "evidence shows a failure" in why
    decision, why = apply_rule(rule, Features(5.0, disagreement=2.0))
    assert decision == "person" and "disagree by 2.0" in why
    rep = report_rule(rule, ITEMS)
    # broken: fail 1.0 1.5 2.0 2.5; person 3.0 3.5 3.5 4.8(contradicted); pass 4.0 4.5 (false passes)
    # good: fail 2.5; person 3.0 3.5; pass 4.0 … 5.0 (7)
    assert (rep.passed, rep.failed, rep.person) == (9, 5, 6)
    assert (rep.false_pass, rep.false_fail, rep.bad, rep.good) == (2, 1, 10, 10)
    assert rep.false_pass_rate == 0.2 and rep.accuracy == pytest.approx(11 / 14)
    assert rep.to_json()["falsePassUpper95"] == clopper_pearson_upper(2, 10)


def test_a_fitted_rule_meets_its_limit_on_the_labels_it_was_fitted_to() -> None:
    for mfp in (0.0, 0.1, 0.2, 0.3):
        rule = fit_rule(ITEMS, max_false_pass=mfp, max_false_fail=0.2)
        rep = report_rule(rule, ITEMS)
        assert rep.false_pass <= math.floor(mfp * rep.bad + 1e-9)
        assert rule.fail_below <= rule.pass_at


def test_labels_without_both_kinds_of_work_fit_no_rule() -> None:
    only_good = [(Features(4.0), True)]
    assert "no broken work" in (no_rule_reason(only_good) or "")
    assert "no good work" in (no_rule_reason([(Features(1.0), False)]) or "")
    with pytest.raises(ValueError, match="no broken work"):
        fit_rule(only_good, max_false_pass=0.1, max_false_fail=0.2)


def test_a_rule_file_with_thresholds_out_of_order_is_refused() -> None:
    with pytest.raises(ValueError, match="failBelow ≤ passAt"):
        Rule.from_json({"passAt": 3.0, "failBelow": 4.0})
    assert Rule.from_json(Rule(4.0, 3.0, 0.05, 0.2).to_json()) == Rule(4.0, 3.0, 0.05, 0.2)


def test_a_dispute_goes_to_a_person_unless_the_panel_fails_it_before_the_dispute() -> None:
    """A dispute (only the judge's own code against the work) is decided on the score the panel gave before it
    was bounded: below ``fail_below`` it fails, otherwise a person settles it, however low the bounded score."""
    rule = Rule(pass_at=4.0, fail_below=3.0, max_false_pass=0.1, max_false_fail=0.2)
    decision, why = apply_rule(rule, Features(2.5, contradicted=True, disputed=4.9))
    assert decision == "person" and "judge's own code" in why and "4.90" in why
    decision, why = apply_rule(rule, Features(2.5, contradicted=True, disputed=2.8))
    assert decision == "fail" and "2.80" in why
    assert apply_rule(rule, Features(2.5, contradicted=True))[0] == "fail"  # a stated example failed: no dispute
    items = [(Features(2.5, True, disputed=4.9), True), (Features(2.5, True, disputed=4.9), False),
             (Features(2.5, True, disputed=2.8), False), (Features(2.5, True), False)]
    rep = report_rule(rule, items)
    assert (rep.passed, rep.failed, rep.person, rep.disputed, rep.false_fail) == (0, 2, 2, 2, 0)
    assert rep.to_json()["disputed"] == 2


def test_the_fit_counts_a_dispute_as_a_false_fail_only_on_its_score_before_the_bound() -> None:
    # good work the judge's own code disputes scores 2.5 bounded, 4.9 before: a person's, never a false fail, so
    # it must not pull fail_below down to 2.5
    items = [*ITEMS, (Features(2.5, contradicted=True, disputed=4.9), True)]
    assert fit_rule(items, max_false_pass=0.1, max_false_fail=0.2).fail_below == pytest.approx(3.25)
    # a disputed broken item never passes, whatever its score before the bound: not a false pass
    items = [*ITEMS, (Features(2.5, contradicted=True, disputed=5.0), False)]
    assert fit_rule(items, max_false_pass=0.1, max_false_fail=0.2).pass_at == pytest.approx(4.1)


def test_disputes_fail_only_when_the_labels_show_the_judges_code_right_often_enough() -> None:
    broken_disputes = [(Features(2.5, True, disputed=4.9), False) for _ in range(3)]
    # 10 good at 0.2: two may fail; 2.5 and 3.0 already do under 3.25, so one good dispute is one too many
    rule = fit_rule([*ITEMS, *broken_disputes, (Features(2.5, True, disputed=4.9), True)],
                    max_false_pass=0.1, max_false_fail=0.2)
    assert rule.disputes == "person"
    # the labels' disputes were all broken work: failing them costs no good work
    rule = fit_rule([*ITEMS, *broken_disputes], max_false_pass=0.1, max_false_fail=0.2)
    assert rule.disputes == "fail"
    decision, why = apply_rule(rule, Features(2.5, True, disputed=4.9))
    assert decision == "fail" and "false-fail limit" in why
    assert fit_rule(ITEMS, max_false_pass=0.1, max_false_fail=0.2).disputes == "person"  # no dispute labelled
    assert Rule.from_json(rule.to_json()) == rule
    assert Rule.from_json({"passAt": 4.0, "failBelow": 3.0}).disputes == "person"  # a rule file from before
    with pytest.raises(ValueError, match="disputes"):
        Rule.from_json({"passAt": 4.0, "failBelow": 3.0, "disputes": "pass"})


def test_when_the_evidence_catches_every_broken_item_the_rule_still_fails_what_it_contradicts() -> None:
    """Holdout-shaped labels: every broken item failed a stated example (bounded at 2.0, contradicted), so no
    cut lets one pass; pass_at stays at fail_below instead of dropping under the bound, where the contradicted
    work would go to a person rather than fail."""
    items = [(Features(2.0, contradicted=True), False) for _ in range(5)]
    items += [(Features(s), True) for s in (2.1, 4.8, 4.85, 4.9, 4.95)]
    rule = fit_rule(items, max_false_pass=0.1, max_false_fail=0.2)
    assert rule.fail_below == pytest.approx(3.45) and rule.pass_at == rule.fail_below  # one good (2.1) may fail
    rep = report_rule(rule, items)
    assert (rep.passed, rep.failed, rep.person, rep.false_fail) == (4, 6, 0, 1)


def test_a_failing_score_everything_polpo_ran_contradicts_goes_to_a_person() -> None:
    rule = Rule(pass_at=4.0, fail_below=3.0, max_false_pass=0.1, max_false_fail=0.2)
    decision, why = apply_rule(rule, Features(1.47, supported=True))
    assert decision == "person" and "every stated example passed" in why and "1.47" in why
    assert apply_rule(rule, Features(1.47))[0] == "fail"
    assert apply_rule(rule, Features(4.5, supported=True))[0] == "pass"
    rep = report_rule(rule, [(Features(1.47, supported=True), True), (Features(1.2), False)])
    assert (rep.person, rep.supported, rep.false_fail, rep.failed) == (1, 1, 0, 1)
    # the fit does not spend its false-fail allowance on good work it would send to a person
    items = [*ITEMS, (Features(1.47, supported=True), True)]
    assert fit_rule(items, max_false_pass=0.1, max_false_fail=0.2).fail_below == pytest.approx(3.25)
