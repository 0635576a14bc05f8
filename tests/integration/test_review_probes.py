"""A probe of the judge's own: the work and the judge's own implementation run side by side (a real ``python3``
subprocess, in a scratch copy) on inputs derived from the stated examples; where they disagree the critical
dimension is bounded. The implementation counts only when it passes every stated example."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polpo.llm.client import LLMClient, ModelSettings
from polpo.review.calibration import Calibration
from polpo.review.consensus import Consensus, DimensionResult
from polpo.review.dimensions import DEFAULT_DIMENSIONS, Dim
from polpo.review.evidence import Evidence
from polpo.review.evidence_cap import FAILED_CAP, PROBE_CAP, apply_cap, evidence_cap
from polpo.review.evidence_run import REFERENCE_TRIES, gather_evidence
from polpo.review.panel import PanelOptions, run_panel
from polpo.review.probes import (
    REFERENCE_FILE,
    Called,
    called_function,
    derive_calls,
    reference_code,
    task_words,
)
from polpo.review.reviewer import ReviewContext
from polpo.review.rule import Rule
from polpo.review.scratch import Scratch
from polpo.review.stated_examples import StatedExample
from polpo.review.work_files import read_work_files
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, text
from tests.support.judges import ScriptedJudge

pytestmark = pytest.mark.anyio

TASK = """Write has_close(numbers, threshold) in solution.py: True if any two numbers are closer than threshold.
>>> has_close([1.0, 2.0, 3.0], 0.5)
False
>>> has_close([1.0, 2.8, 3.0, 4.0], 0.3)
True
"""
CORRECT = ("def has_close(numbers, threshold):\n    for i, a in enumerate(numbers):\n"
           "        for j, b in enumerate(numbers):\n            if i != j and abs(a - b) < threshold:\n"
           "                return True\n    return False\n")
NEIGHBOURS = ("def has_close(numbers, threshold):\n    for a, b in zip(numbers, numbers[1:]):\n"
              "        if abs(a - b) < threshold:\n            return True\n    return False\n")  # passes both examples


async def gather(ws: Path, reference: str | list[str | None] | None) -> tuple[Evidence, list[str]]:
    """``reference``: the judge's implementation, or one per try (until one passes the stated examples)."""
    asked: list[str] = []

    async def write(name: str, attempt: int) -> str | None:
        asked.append(name)
        return reference[attempt] if isinstance(reference, list) else reference

    scratch = Scratch(ws, ["solution.py"])
    try:
        return await gather_evidence(description=TASK, criteria="", work=read_work_files(ws, ["solution.py"]),
                                     output=None, checks=(), scratch=scratch, write_reference=write), asked
    finally:
        scratch.close()


def work(tmp_path: Path, source: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "solution.py").write_text(source)
    return tmp_path


def test_probe_calls_change_one_stated_argument_at_a_time() -> None:
    ex = [StatedExample("has_close([1.0, 2.0], 0.5)", "False", "doctest", "task"),
          StatedExample("other(1)", "1", "value", "task")]
    calls = derive_calls(ex, "has_close")
    assert calls[:3] == ["has_close([], 0.5)", "has_close([1.0], 0.5)", "has_close([2.0, 1.0], 0.5)"]
    assert "has_close([1.0, 2.0], 0.5)" not in calls and all(c.startswith("has_close(") for c in calls)
    assert "has_close([1.0, 2.0], 0.0)" in calls and len(calls) == len(set(calls))
    assert derive_calls([StatedExample("f(g(1))", "2", "value", "task")], "f") == []  # not literals: no probes


def test_probe_inputs_reach_the_edges_subtle_bugs_sit_on() -> None:
    def calls(source: str, name: str = "f") -> list[str]:
        return derive_calls([StatedExample(source, "0", "value", "task")], name)

    assert {"f({})", "f({'a': 1})", "f({'b': 2, 'a': 1})"} <= set(calls("f({'a': 1, 'b': 2})"))  # an empty dict
    assert {"f([1, 1, 2])", "f([1, 2, -3])"} <= set(calls("f([1, 2])"))  # equal neighbours; a total back to zero
    assert "f('a  b')" in calls("f('a b')") and not any("  " in c for c in calls("f('ab')"))  # doubled spaces
    fly = calls("fly([3, 2, 3], 1)", "fly")
    assert {"fly([3, 2, 3], 8)", "fly([3, 2, 3], 3)"} <= set(fly)  # a limit equal to the sum, the length
    assert "g(34, 34, 12)" in calls("g(7, 34, 12)", "g")  # a number equal to another argument


SORT_TASK = """def sort_numbers(numbers: str) -> str:
    \"\"\" Input is a space-delimited string of numberals from 'zero' to 'nine'.
    Valid choices are 'zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight' and 'nine'.
    >>> sort_numbers('three one five')
    'one three five'
    \"\"\""""


def test_an_input_made_of_the_tasks_quoted_words_gets_the_words_it_lacks() -> None:
    ex = [StatedExample("sort_numbers('three one five')", "'one three five'", "doctest", "task")]
    calls = derive_calls(ex, "sort_numbers", SORT_TASK)
    added = [c for c in calls if c.startswith("sort_numbers('three one five ")]
    assert added == ["sort_numbers('three one five zero')", "sort_numbers('three one five nine')",
                     "sort_numbers('three one five two')"]  # the first words it lacks, at most MAX_WORDS
    assert task_words(SORT_TASK)[:3] == ["zero", "nine", "one"]
    assert added[0] not in derive_calls(ex, "sort_numbers")  # without the task's text: no such input
    # an input not made of the task's words gets none; nor do an example's own arguments count as words
    odd = [StatedExample("f('abcde', 'ae')", "'bcd'", "value", "task")]
    assert not any("zero" in c or "'abcde ae'" in c for c in derive_calls(odd, "f", SORT_TASK + " f('abcde')"))


def test_a_call_compared_in_a_doctest_and_one_given_by_keywords_are_probed_as_written() -> None:
    md5 = [StatedExample("string_to_md5('Hello world') == '3e25960a'", "True", "doctest", "task")]
    assert called_function(md5[0]) == Called("string_to_md5", ["Hello world"])
    assert "string_to_md5('')" in derive_calls(md5, "string_to_md5")
    kw = [StatedExample('reverse_delete(s = "abcde", c = "ae")', "('bcd',False)", "value", "task")]
    calls = derive_calls(kw, "reverse_delete")
    assert "reverse_delete(s='', c='ae')" in calls and "reverse_delete(s='abcde', c='')" in calls
    assert called_function(StatedExample("f(**{'a': 1})", "1", "value", "task")) is None


def test_the_reference_code_must_define_the_function() -> None:
    assert reference_code("```python\ndef f(x):\n    return x\n```", "f") == "def f(x):\n    return x\n"
    assert reference_code("def g(x): return x", "f") is None and reference_code("```python\ndef f(:\n```", "f") is None


async def test_a_credible_reference_that_disagrees_is_evidence_and_bounds_the_score(tmp_path: Path) -> None:
    ev, asked = await gather(work(tmp_path / "w", NEIGHBOURS), CORRECT)
    assert asked == ["has_close"]
    assert [i.passed for i in ev.examples] == [True, True]  # the stated examples do not catch it
    probes = [i for i in ev.items if i.kind == "probe"]
    assert probes and all(i.passed is False for i in probes), ev.items
    assert "passing all 2 stated examples" in probes[0].detail
    assert not (tmp_path / "w" / REFERENCE_FILE).exists()  # the reference lives in the copy only
    cap = evidence_cap(ev)
    assert cap is not None and cap.cap == PROBE_CAP and cap.items == [i.id for i in probes]
    scores = [DimensionResult(d.name, 5.0, d.weight, "", [], [], 5.0, 0) for d in DEFAULT_DIMENSIONS]
    capped = apply_cap(Consensus(scores, 5.0, True, 3.0, [0], True, []), cap, DEFAULT_DIMENSIONS)
    assert not capped.passed and capped.global_score == PROBE_CAP and capped.capped_by == ["correctness"]


async def test_agreement_on_every_probe_is_one_item(tmp_path: Path) -> None:
    ev, _ = await gather(work(tmp_path, CORRECT), CORRECT.replace("abs(a - b)", "abs(b - a)"))
    (probe,) = [i for i in ev.items if i.kind == "probe"]
    assert probe.passed is True and "the same as the judge's own has_close" in probe.detail
    assert evidence_cap(ev) is None and ev.supports_work  # every example and every probe passed


async def test_a_probe_only_one_side_raises_on_is_not_counted(tmp_path: Path) -> None:
    """Derived inputs may be ones the task never promised to take (HumanEval's parse_music on a malformed note
    string: the canonical solution raises KeyError, a lenient one skips it); that is no disagreement."""
    strict = CORRECT.replace("    for i, a", "    if threshold < 0.4:\n        raise ValueError(threshold)\n    for i, a")
    ev, _ = await gather(work(tmp_path, strict), CORRECT)  # the probes change 0.5 and 0.3 one at a time
    assert [i.passed for i in ev.examples] == [True, False]  # 0.3: a stated example, so that one is a failure
    ev, _ = await gather(work(tmp_path, CORRECT.replace("    for i, a", "    if threshold >= 1:\n"
                                                       "        raise ValueError(threshold)\n    for i, a")), CORRECT)
    assert [i.passed for i in ev.examples] == [True, True]
    assert not [i for i in ev.items if i.kind == "probe" and i.passed is False], ev.items
    assert any(i.kind == "note" and "raised an error in one of the two and not the other" in i.label
               for i in ev.items), ev.items
    assert evidence_cap(ev) is None


async def test_a_reference_that_fails_a_stated_example_is_no_second_opinion(tmp_path: Path) -> None:
    wrong = "def has_close(numbers, threshold):\n    return False\n"
    ev, _ = await gather(work(tmp_path, NEIGHBOURS), wrong)
    assert not [i for i in ev.items if i.kind == "probe"]
    assert any(i.kind == "note" and "fails 1 of the 2 stated examples" in i.label for i in ev.items)
    assert evidence_cap(ev) is None
    ev, _ = await gather(work(tmp_path, NEIGHBOURS), None)  # the judge wrote nothing usable: no probes
    assert not [i for i in ev.items if i.kind == "probe"]


async def test_the_judge_is_asked_again_until_its_implementation_passes_the_stated_examples(tmp_path: Path) -> None:
    wrong = "def has_close(numbers, threshold):\n    return False\n"
    ev, asked = await gather(work(tmp_path, NEIGHBOURS), [wrong, None, CORRECT])  # a wrong one, nothing, a right one
    assert asked == ["has_close"] * 3
    probes = [i for i in ev.items if i.kind == "probe"]
    assert probes and all(i.passed is False for i in probes)  # the third is the second opinion that catches it
    assert evidence_cap(ev) is not None
    ev, asked = await gather(work(tmp_path, NEIGHBOURS), [wrong, wrong, wrong, CORRECT])
    assert len(asked) == REFERENCE_TRIES and not [i for i in ev.items if i.kind == "probe"]  # a bound on the asking
    assert any("(3 times)" in i.label for i in ev.items if i.kind == "note")
    ev, asked = await gather(work(tmp_path / "right", CORRECT), CORRECT)
    assert len(asked) == 1  # a credible first implementation is not asked for again


async def test_an_implementation_that_raises_where_the_work_returns_is_asked_for_again(tmp_path: Path) -> None:
    """HumanEval's strange_sort_list: the judge's first implementation raised on every odd-length list, where the
    bug (it drops the middle element) shows; a second one that does not raise is the better second opinion."""
    raising = CORRECT.replace("    for i, a", "    if len(numbers) == 1:\n        raise ValueError('one')\n    for i, a")
    ev, asked = await gather(work(tmp_path, NEIGHBOURS), [raising, CORRECT])
    assert len(asked) == 2
    assert [i for i in ev.items if i.kind == "probe" and i.passed is False]  # the second one's probes catch it
    ev, asked = await gather(work(tmp_path / "again", NEIGHBOURS), [raising, raising, raising])
    assert len(asked) == REFERENCE_TRIES  # bounded; what the first one established stands


async def test_a_failed_stated_example_bounds_lower_than_a_probe(tmp_path: Path) -> None:
    ev, _ = await gather(work(tmp_path, "def has_close(numbers, threshold):\n    return True\n"), CORRECT)
    cap = evidence_cap(ev)
    assert cap is not None and cap.cap == FAILED_CAP < PROBE_CAP and not ev.supports_work


async def test_the_panel_asks_the_first_judge_once_for_its_own_implementation(tmp_path: Path) -> None:
    judge = ScriptedJudge(score=5.0)

    def answer(req: RecordedRequest) -> Reply:
        if "from its description alone" in str(req["messages"][-1]["content"]):
            return text(f"```python\n{CORRECT}```")
        return judge(req)

    with FakeLLM(models=("fake-a",)) as srv:
        srv.responder = answer
        ctx = ReviewContext(title="has_close", description=TASK, criteria="", workspace=work(tmp_path, NEIGHBOURS),
                            files_changed=["solution.py"], timeline="agent ran")
        model = ModelSettings("openai/fake-a", api_base=srv.base_url, timeout=20)
        result = await run_panel(LLMClient(max_retries=0), [model, model, model], ctx,
                                 [Dim("correctness", 1.0, critical=True)], 3.0)
        writes = [r for r in srv.requests if "from its description alone" in json.dumps(r.body)]
    assert len(writes) == 1
    assert result.evidence_cap is not None and result.global_score == PROBE_CAP and not result.passed
    assert result.probe is not None and result.probe["usable"] and result.tokens > 0
    opts = PanelOptions(probes=False)  # probes off: no implementation asked for, no bound
    with FakeLLM(models=("fake-a",)) as srv:
        srv.responder = answer
        model = ModelSettings("openai/fake-a", api_base=srv.base_url, timeout=20)
        result = await run_panel(LLMClient(max_retries=0), [model], ctx, [Dim("correctness", 1.0, critical=True)],
                                 3.0, options=opts)
        assert not [r for r in srv.requests if "from its description alone" in json.dumps(r.body)]
    assert result.evidence_cap is None and result.passed


async def test_with_a_rule_a_dispute_waits_for_a_person_and_a_failed_stated_example_fails(tmp_path: Path) -> None:
    """Only the judge's own code against the work (its model can be the one in error: 3 of 9 disputes on the
    1.5B model were correct work) is a person's to settle; a stated example the work fails is a fact and fails;
    a failing score on work every example and probe passed is contradicted by the evidence: a person's."""
    judge = ScriptedJudge(score=5.0)

    def answer(req: RecordedRequest) -> Reply:
        if "from its description alone" in str(req["messages"][-1]["content"]):
            return text(f"```python\n{CORRECT}```")
        return judge(req)

    rule = Rule(pass_at=4.0, fail_below=3.0, max_false_pass=0.1, max_false_fail=0.2)
    opts = PanelOptions(calibration=Calibration(rule=rule))
    dims = [Dim("correctness", 1.0, critical=True)]
    results = []
    for name, source in (("disputed", NEIGHBOURS), ("failed", "def has_close(numbers, threshold):\n    return True\n"),
                         ("supported", CORRECT)):
        with FakeLLM(models=("fake-a",)) as srv:
            srv.responder = answer
            ctx = ReviewContext(title="has_close", description=TASK, criteria="", workspace=work(tmp_path / name, source),
                                files_changed=["solution.py"], timeline="agent ran")
            model = ModelSettings("openai/fake-a", api_base=srv.base_url, timeout=20)
            judge.score = 1.0 if name == "supported" else 5.0
            results.append(await run_panel(LLMClient(max_retries=0), [model], ctx, dims, 3.0, options=opts))
    disputed, failed, supported = results
    assert disputed.evidence_cap is not None and disputed.evidence_cap.disputed
    assert disputed.global_score == PROBE_CAP and disputed.disputed_score == 5.0  # the panel's own 5, before the bound
    assert disputed.decision == "person" and not disputed.passed
    assert "the judge's own code" in disputed.decision_reason and "5.00" in disputed.decision_reason
    review = disputed.review_json()
    assert review["evidenceCap"]["disputed"] and review["disputedScore"] == 5.0
    assert failed.evidence_cap is not None and not failed.evidence_cap.disputed and failed.disputed_score is None
    assert failed.decision == "fail"
    # correct work, every example and probe passing, that the panel scores 1: the evidence contradicts the fail
    assert supported.evidence.supports_work and supported.global_score == 1.0 and supported.decision == "person"
    assert "every stated example passed" in supported.decision_reason
