"""``polpo calibrate``'s report on disputes: the results file keeps the score before the judge's own code bounded
it, the fit sees it, and the report says how many items went to a person for a dispute and what the rule does
with them."""

from __future__ import annotations

from polpo.assessment.calibrate import ItemResult
from polpo.assessment.calibrate_report import fit, render, report


def results() -> list[ItemResult]:
    good = [ItemResult(f"g{i}", 5.0, s, {0: s}) for i, s in enumerate((4.8, 4.9, 4.95, 4.7))]
    broken = [ItemResult(f"b{i}", 1.0, 2.0, {0: 4.9}, contradicted=True) for i in range(3)]
    # a correct item the judge's own code got wrong, and a broken one it caught: both bounded at 2.5
    disputes = [ItemResult("gd", 5.0, 2.5, {0: 4.9}, contradicted=True, disputed=4.9),
                ItemResult("bd", 1.0, 2.5, {0: 4.95}, contradicted=True, disputed=4.95)]
    return [*good, *broken, *disputes]


def test_a_dispute_survives_the_results_file_and_the_report_counts_it() -> None:
    items = results()
    assert [ItemResult.from_json(r.to_json()).disputed for r in items] == [r.disputed for r in items]
    rule, why = fit(items, max_false_pass=0.1, max_false_fail=0.2)
    assert rule is not None, why
    # 5 good at 0.2 allow one false fail; fail_below spends it (4.7), so failing disputes ("gd") would exceed it
    assert rule.disputes == "person" and 4.7 < rule.fail_below < 4.8
    rep = report(items, rule, fitted=True)
    on = rep["rule"]["onLabels"]
    assert (on["person"], on["disputed"], on["falseFail"], on["falsePass"]) == (2, 2, 1, 0)
    text = render(rep, source="labels.jsonl", judges=["openai/m"])
    assert "disputes go to a person" in text
    assert "2 of the items sent to a person were disputes: only the judge's own code was against the work" in text


def test_a_failing_score_the_evidence_contradicts_is_kept_and_counted() -> None:
    items = [*results(), ItemResult("gs", 5.0, 1.47, {0: 1.47}, supported=True)]
    assert ItemResult.from_json(items[-1].to_json()).supported
    rule, _ = fit(items, max_false_pass=0.1, max_false_fail=0.2)
    assert rule is not None
    rep = report(items, rule, fitted=True)
    assert rep["rule"]["onLabels"]["supported"] == 1
    assert "1 of the items sent to a person were failed by the panel while everything polpo ran passed" in \
        render(rep, source="labels.jsonl", judges=["openai/m"])
