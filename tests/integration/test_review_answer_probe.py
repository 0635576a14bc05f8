"""A text answer checked against programs the judge wrote from the task (polpo.review.answer_probe): the
programs run as real ``python3`` subprocesses in a scratch folder, the answers compare as data, and the work
counts as differing only when two programs agree with each other and not with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polpo.llm.client import LLMClient, ModelSettings
from polpo.review.answer_probe import ANSWER_PROGRAM, answer_program, comparable, same_answer
from polpo.review.dimensions import Dim
from polpo.review.evidence import Evidence, render_evidence
from polpo.review.evidence_cap import PROBE_CAP, evidence_cap
from polpo.review.evidence_run import gather_evidence
from polpo.review.panel import PanelOptions, run_panel
from polpo.review.reviewer import ReviewContext
from polpo.review.scratch import Scratch
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, text
from tests.support.judges import ScriptedJudge

pytestmark = pytest.mark.anyio

TASK = "List every prime number below 30, in increasing order, separated by commas. Answer with the list only."
RIGHT = "2, 3, 5, 7, 11, 13, 17, 19, 23, 29"
WRONG = "2, 3, 5, 7, 11, 13, 17, 19, 23, 27, 29"  # 27 is 3 · 9
PRIMES = ("print(', '.join(str(n) for n in range(2, 30) if all(n % d for d in range(2, n))))\n")
ODDS = "print(', '.join(str(n) for n in range(3, 30, 2)))\n"  # a wrong program of the judge's
ASKS = "`answer()` that takes no arguments"


def test_answers_compare_as_data_in_any_of_the_forms_a_list_is_written() -> None:
    assert same_answer(RIGHT, "[2, 3, 5, 7, 11, 13, 17, 19, 23, 29]") is True
    assert same_answer(RIGHT, "2 3 5 7 11 13 17 19 23 29") is True
    assert same_answer(RIGHT, WRONG) is False
    assert same_answer("```json\n[1.5, 2]\n```", "1.5, 2.0") is True
    rows = '[{"name": "Ada", "age": 36}, {"name": "Linus", "age": 28}]'
    assert same_answer(rows, '[{"age": 36, "name": "Ada"}, {"age": 28.0, "name": "Linus"}]') is True
    assert same_answer(rows, rows.replace("28", '"28"')) is False  # a number left a string is another answer
    assert same_answer("[true]", "[1]") is False and same_answer("42", "42.0") is True
    # a program that prints its list of dicts with print(), not json.dumps: the same data
    assert same_answer(rows, "[{'name': 'Ada', 'age': 36}, {'name': 'Linus', 'age': 28}]") is True
    assert same_answer("(1, 2)", "[1, 2]") is True and comparable("{'a': f(1)}") is None


def test_prose_code_and_patterns_are_not_data() -> None:
    for answer in ("The answer is 42.", r"\d{4}-(0[1-9]|1[0-2])", "def f(x):\n    return x", "", "a b c", "done",
                   '"done"', "true", "null"):
        assert comparable(answer) is None, answer
    assert same_answer("The answer is 42.", "42") is None


def test_the_program_must_parse_and_print() -> None:
    assert answer_program(f"```python\n{PRIMES}```") == PRIMES  # a whole program that prints: run as it is
    assert answer_program("```python\nx = 1\n```") is None  # prints nothing
    assert answer_program("```python\nprint(\n```") is None and answer_program(None) is None


async def gather(tmp_path: Path, output: str, programs: list[str | None]) -> tuple[Evidence, int]:
    asked = [0]

    async def write(attempt: int) -> str | None:
        asked[0] += 1
        return programs[attempt] if attempt < len(programs) else None

    scratch = Scratch(tmp_path, [], output)
    try:
        return await gather_evidence(description=TASK, criteria="", work=(), output=output,
                                     checks=(), scratch=scratch, write_answer=write), asked[0]
    finally:
        scratch.close()


async def test_a_function_answer_is_called_and_what_it_returns_compared_as_data(tmp_path: Path) -> None:
    """Asked for a whole program, the 1.5B model read a file the task never gave; a function ``answer()`` is asked
    for instead, and polpo adds the lines that print what it returns."""
    returns_list = answer_program("```python\ndef answer():\n    return [n for n in range(2, 30) "
                                  "if all(n % d for d in range(2, n))]\n```")
    returns_text = answer_program("```python\ndef answer():\n    return '2, 3, 5, 7, 11, 13, 17, 19, 23, 29'\n```")
    assert returns_list is not None and returns_text is not None
    for program in (returns_list, returns_text):
        ev, asked = await gather(tmp_path, RIGHT, [program])
        assert [i.passed for i in ev.items if i.kind == "probe"] == [True] and asked == 1
    ev, _ = await gather(tmp_path, WRONG, [returns_list, returns_text])
    assert [i.passed for i in ev.items if i.kind == "probe"] == [False]  # two functions agree; the work does not
    assert answer_program("```python\ndef answer(rows):\n    return rows\n```") is None  # takes an argument
    chatty = answer_program("```python\ndef answer():\n    return [2, 3]\n\nprint(answer())\nprint('done')\n```")
    assert chatty is not None  # its own prints come before what polpo prints, and are not the answer
    ev, _ = await gather(tmp_path, "2, 3", [chatty])
    assert [i.passed for i in ev.items if i.kind == "probe"] == [True]


async def test_a_right_answer_agrees_with_the_first_program_and_no_second_is_asked(tmp_path: Path) -> None:
    ev, asked = await gather(tmp_path, RIGHT, [PRIMES, PRIMES])
    (probe,) = [i for i in ev.items if i.kind == "probe"]
    assert probe.passed is True and "prints the same answer" in probe.detail and asked == 1
    assert evidence_cap(ev) is None
    assert not (tmp_path / ANSWER_PROGRAM).exists()  # the program ran in the scratch folder, not in the work


async def test_a_wrong_answer_differs_when_two_programs_agree_and_the_score_is_bounded(tmp_path: Path) -> None:
    ev, asked = await gather(tmp_path, WRONG, [PRIMES, PRIMES.replace("all(n % d", "all(n % d != 0")])
    (probe,) = [i for i in ev.items if i.kind == "probe"]
    assert probe.passed is False and asked == 2
    assert "27" in probe.detail and "two programs" in probe.detail
    cap = evidence_cap(ev)
    assert cap is not None and cap.cap == PROBE_CAP and "answer differs" in cap.why
    shown = render_evidence(ev).splitlines()  # as the reviewers read it
    assert shown[0] == ("E1 [DIFFERS] the answer, computed by a program the judge wrote from the task alone "
                        "(programs the judge wrote from the task alone)")


async def test_one_program_that_agrees_is_enough_and_a_failed_one_is_asked_again(tmp_path: Path) -> None:
    # the 1.5B model's first program read a file the task never gave; a second, sampled, had the data in it
    reads_a_file = "print(open('input.csv').read())\n"
    ev, asked = await gather(tmp_path, RIGHT, [reads_a_file, PRIMES])
    (probe,) = [i for i in ev.items if i.kind == "probe"]
    assert probe.passed is True and asked == 2
    ev, asked = await gather(tmp_path, RIGHT, [ODDS, PRIMES])  # a wrong first program; the second agrees
    assert [i.passed for i in ev.items if i.kind == "probe"] == [True] and asked == 2


async def test_programs_that_agree_on_nothing_are_no_evidence(tmp_path: Path) -> None:
    ev, asked = await gather(tmp_path, RIGHT, ["print('1, 2')\n", "print('3, 4')\n", "print('5, 6')\n", PRIMES])
    assert asked == 3 and not [i for i in ev.items if i.kind == "probe"]  # at most three are asked for
    (note,) = ev.items
    assert "did not settle it" in note.label and "1, 2" in note.detail and evidence_cap(ev) is None
    ev, asked = await gather(tmp_path, WRONG, [PRIMES, PRIMES, None])  # the same program twice: one opinion
    assert asked == 3 and not [i for i in ev.items if i.kind == "probe"] and evidence_cap(ev) is None


async def test_a_program_that_fails_or_prints_no_data_is_a_note(tmp_path: Path) -> None:
    ev, _ = await gather(tmp_path, RIGHT, ["raise SystemExit(3)\nprint(1)\n"])
    (note,) = ev.items
    assert note.kind == "note" and "exit code 3" in note.detail and evidence_cap(ev) is None
    assert "no runnable program in the reply" in note.detail  # the two asked for after it
    ev, _ = await gather(tmp_path, RIGHT, ["print('I think the answer is the primes')\n"])
    assert "printed no answer polpo can compare as data" in ev.items[0].detail


async def test_a_prose_answer_asks_for_no_program(tmp_path: Path) -> None:
    ev, asked = await gather(tmp_path, "Primes are numbers with exactly two divisors.", [PRIMES])
    assert asked == 0 and not ev.items


async def test_the_panel_asks_the_judge_for_the_program_and_bounds_a_wrong_answer(tmp_path: Path) -> None:
    judge = ScriptedJudge(score=5.0)

    def reply(req: RecordedRequest) -> Reply:
        if ASKS in str(req["messages"][-1]["content"]):  # each program a little different, as sampling makes them
            return text(f"```python\n# try {req.get('seed', 0)}\n{PRIMES}```")
        return judge(req)

    dims = [Dim("correctness", 1.0, critical=True)]
    ctx = ReviewContext(title="primes", description=TASK, criteria="", workspace=tmp_path, files_changed=[],
                        timeline="agent answered", output=WRONG)
    with FakeLLM(models=("fake-a",)) as srv:
        srv.responder = reply
        model = ModelSettings("openai/fake-a", api_base=srv.base_url, timeout=20)
        result = await run_panel(LLMClient(max_retries=0), [model], ctx, dims, 3.0)
        asked = [r for r in srv.requests if ASKS in json.dumps(r.body)]
    assert len(asked) == 2  # the first program differs: a second, sampled, is asked for, and agrees with it
    assert asked[1].body.get("temperature", 0) > 0
    assert result.evidence_cap is not None and result.global_score == PROBE_CAP and not result.passed
    assert result.probe is not None and result.probe["function"] == "the answer" and result.probe["usable"]
    with FakeLLM(models=("fake-a",)) as srv:  # the right answer passes on one program
        srv.responder = reply
        model = ModelSettings("openai/fake-a", api_base=srv.base_url, timeout=20)
        result = await run_panel(LLMClient(max_retries=0), [model], ReviewContext(
            title="primes", description=TASK, criteria="", workspace=tmp_path, files_changed=[],
            timeline="agent answered", output=RIGHT), dims, 3.0)
        assert len([r for r in srv.requests if ASKS in json.dumps(r.body)]) == 1
    assert result.passed and result.evidence_cap is None
    with FakeLLM(models=("fake-a",)) as srv:  # probes off: no program asked for, no bound
        srv.responder = reply
        model = ModelSettings("openai/fake-a", api_base=srv.base_url, timeout=20)
        result = await run_panel(LLMClient(max_retries=0), [model], ctx, dims, 3.0,
                                 options=PanelOptions(probes=False))
        assert not [r for r in srv.requests if ASKS in json.dumps(r.body)]
    assert result.passed and result.evidence_cap is None
