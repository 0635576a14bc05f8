"""The metric's pure decisions: which number is read from a command's output, how it is judged against min, max
and a baseline (with a direction and a tolerance), and what a mission file may write (each mistake with its JSON
path and reason)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from pydantic import TypeAdapter

from polpo.assessment.judge import skip_reason
from polpo.checks.expectations import MetricExpectation
from polpo.checks.metric_rules import allowance, judge, read_number
from polpo.checks.registry import Expectation, describe_expectation
from polpo.mission.loader import load_mission

EXP: TypeAdapter[Any] = TypeAdapter(Expectation)


def metric(**fields: Any) -> MetricExpectation:
    exp = EXP.validate_python({"type": "metric", "command": "cov", **fields})
    assert isinstance(exp, MetricExpectation)
    return exp


# ------------------------------------------------------------------------------------------------ reading


@pytest.mark.parametrize(("output", "pattern", "value", "line"), [
    ("Name   Stmts   Miss  Cover\nTOTAL    120     12    90%\n", None, 90.0, "TOTAL    120     12    90%"),
    ("82.5\n", None, 82.5, "82.5"),
    ("x=-3.5e2 done", None, -350.0, "x=-3.5e2 done"),
    ("ratio .75", None, 0.75, "ratio .75"),
    ("bundle: 1,234,567 bytes", None, 1234567.0, "bundle: 1,234,567 bytes"),  # thousands, one number
    ("build-2", None, 2.0, "build-2"),             # a dash glued to a word is not a sign
    ("12 built by py311 on v2\n", None, 12.0, "12 built by py311 on v2"),  # digits in words are not numbers
    ("a\nb 12\n\n", None, 12.0, "b 12"),            # the line it was read from, not the last line
    ("Ran 3 tests in 0.001s\n\nOK\n", r"Ran (\d+) tests?", 3.0, "Ran 3 tests in 0.001s"),
    ("Ran 3 tests in 0.001s\n\nOK\n", None, 0.001, "Ran 3 tests in 0.001s"),  # why pattern exists
    ("TOTAL 1 2 95%\nother 7\n", "^TOTAL.*", 95.0, "TOTAL 1 2 95%"),  # the last number in the match
    ("cov 10\ncov 20\n", r"cov (\d+)", 20.0, "cov 20"),  # the last match
])
def test_the_number_read_from_the_output(output: str, pattern: str | None, value: float, line: str) -> None:
    assert read_number(output, pattern) == (value, line)


@pytest.mark.parametrize(("output", "pattern", "why"), [
    ("", None, "the command printed no number"),
    ("no coverage data\n", None, "the command printed no number"),
    ("v2 py311 sha1", None, "the command printed no number"),
    ("Ran 3 tests", r"TOTAL.*", "the command printed nothing that matches the pattern /TOTAL.*/"),
    ("TOTAL n/a", r"TOTAL.*", "the pattern's match 'TOTAL n/a' holds no number"),
    ("size 3", r"size (x)?", "the pattern /size (x)?/ matched, but its first group matched nothing"),
    ("1e999", None, "'1e999' is too large to be a number polpo can compare"),
])
def test_no_number_is_a_reason(output: str, pattern: str | None, why: str) -> None:
    assert read_number(output, pattern) == why


# ------------------------------------------------------------------------------------------------ judging


@pytest.mark.parametrize(("fields", "value", "passed", "message"), [
    ({"min": 50}, 50.0, True, "cov = 50: at least the minimum 50"),
    ({"min": 50}, 49.9, False, "cov = 49.9: below the minimum 50"),
    ({"max": 100}, 100.0, True, "cov = 100: at most the maximum 100"),
    ({"min": 1, "max": 2}, 3.0, False, "cov = 3: at least the minimum 1; above the maximum 2"),
    ({"min": 0.3}, 0.1 + 0.2, True, "cov = 0.3: at least the minimum 0.3"),  # float sums round, not fail
])
def test_min_and_max_are_inclusive(fields: dict[str, Any], value: float, passed: bool, message: str) -> None:
    got = judge(value, metric(**fields), None, "cov")
    assert (got.passed, got.message) == (passed, message)


@pytest.mark.parametrize(("fields", "value", "passed", "said"), [
    ({}, 81.0, True, "better than 80 before the task (higher is better)"),
    ({}, 80.0, True, "the same as 80 before the task (higher is better)"),
    ({}, 79.9, False, "worse than 80 before the task (higher is better)"),
    ({"better": "lower"}, 79.0, True, "better than 80 before the task (lower is better)"),
    ({"better": "lower"}, 80.5, False, "worse than 80 before the task (lower is better)"),
    ({"tolerance": 0.5}, 79.5, True, "worse than 80 before the task, within the tolerance 0.5 (higher is better)"),
    ({"tolerance": 0.5}, 79.4, False,
     "worse than 80 before the task by more than the tolerance 0.5 (higher is better)"),
    ({"tolerance": "5%", "better": "lower"}, 84.0, True,
     "worse than 80 before the task, within the tolerance 5% (lower is better)"),
    ({"tolerance": "5%", "better": "lower"}, 84.1, False,
     "worse than 80 before the task by more than the tolerance 5% (lower is better)"),
])
def test_no_worse_than_the_baseline(fields: dict[str, Any], value: float, passed: bool, said: str) -> None:
    got = judge(value, metric(baseline="before", **fields), 80.0, "coverage")
    assert got.passed is passed
    assert got.message.split(": ", 1)[1] == said


def test_the_facts_record_what_was_compared() -> None:
    got = judge(78.0, metric(baseline="before", min=50, tolerance="5%"), 80.0, "coverage")
    assert got.passed  # 80 - 5% of 80 = 76
    assert got.facts == {"value": 78.0, "min": 50.0, "baseline": 80.0, "better": "higher", "tolerance": "5%",
                         "limit": 76.0}
    assert got.message == ("coverage = 78: at least the minimum 50; worse than 80 before the task, within the "
                           "tolerance 5% (higher is better)")


def test_a_baseline_that_is_missing_fails_with_the_reason() -> None:
    got = judge(90.0, metric(baseline="before", min=50), None, "coverage")
    assert not got.passed and got.facts["baseline"] is None
    assert "no baseline was measured before the task ran: nothing to compare with" in got.message


def test_a_percentage_tolerance_is_of_the_baselines_size() -> None:
    assert allowance("10%", -50.0) == 5.0 and allowance(" 2.5 % ", 200.0) == 5.0
    assert allowance(0.25, 1000.0) == 0.25 and allowance(None, 1.0) == 0.0


# ------------------------------------------------------------------------------------------------ the file


def problems(*expectations: dict[str, Any]) -> list[tuple[str, str]]:
    doc = {"name": "m", "tasks": [{"title": "t", "description": "d", "expectations": list(expectations)}]}
    r = load_mission(orjson.dumps(doc), known_agents=None)
    return [(p.path, p.message) for p in r.problems]


@pytest.mark.parametrize(("fields", "path", "message"), [
    ({}, "", 'a metric needs something to compare its number with: "min", "max" or "baseline": "before"'),
    ({"min": 5, "max": 3}, ".max", "max (3) is below min (5): no value could pass"),
    ({"max": 3, "better": "lower"}, ".better", 'better says which way is no worse than the baseline: it needs '
                                                '"baseline": "before"'),
    ({"min": 3, "tolerance": 1}, ".tolerance", 'tolerance loosens the comparison with the baseline: it needs '
                                               '"baseline": "before"'),
    ({"baseline": "before", "tolerance": "lots"}, ".tolerance", "neither a number nor a percentage"),
    ({"baseline": "before", "tolerance": -1}, ".tolerance", "cannot be negative"),
    ({"baseline": "after"}, ".baseline", "must be 'before'"),
    ({"baseline": "before", "better": "up"}, ".better", "must be 'higher' or 'lower'"),
    ({"min": 1, "treshold": 3}, ".treshold", "unknown key"),
    ({"min": "5"}, ".min", "must be a number"),
    ({"min": 1, "pattern": "("}, ".pattern", "pattern is not a valid regular expression"),
])
def test_mission_validation_names_the_path_and_the_reason(fields: dict[str, Any], path: str, message: str) -> None:
    found = problems({"type": "metric", "command": "cov", **fields})
    assert any(p == f"$.tasks[0].expectations[0]{path}" and message in m for p, m in found), found


def test_a_full_metric_validates() -> None:
    assert problems({"type": "metric", "name": "bundle size", "command": "du -b dist.js", "pattern": r"(\d+)",
                     "min": 1, "max": 500000, "baseline": "before", "better": "lower", "tolerance": "2%",
                     "timeout": "PT30S"}) == []


def test_the_agent_is_told_what_the_number_must_be() -> None:
    exp = {"type": "metric", "name": "coverage", "command": "cov", "min": 50, "baseline": "before"}
    assert describe_expectation(exp) == "metric: `cov` prints a number (coverage) that must be at least 50, no " \
                                        "lower than before your work"
    assert describe_expectation({"type": "metric", "command": "du -b x", "max": 10, "baseline": "before",
                                 "better": "lower"}) == \
        "metric: `du -b x` prints a number that must be at most 10, no higher than before your work"


def test_the_expectation_judge_is_not_called_for_a_failed_metric() -> None:
    exps = [{"type": "test", "command": "pytest"}, {"type": "metric", "command": "cov", "min": 50}]
    assert skip_reason([{"index": 0}], exps, None) is None  # a command may be corrected
    why = skip_reason([{"index": 1}], exps, None)
    assert why is not None and "a metric cannot be corrected" in why
