"""Evidence first: before any reviewer looks, the panel runs the examples the task states against the work's
Python files (a real ``python3`` subprocess, in a scratch copy), and every reviewer is shown the results as
numbered items it must cite; a reviewer's own ``run_command`` runs in its own copy. The live workspace is never
touched, a hanging example is bounded, and what the work prints is never read as a result."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from polpo.llm.client import LLMClient, ModelSettings
from polpo.review import evidence_run, scratch
from polpo.review.dimensions import Dim
from polpo.review.evidence import CheckEvidence, Evidence
from polpo.review.evidence_run import gather_evidence
from polpo.review.panel import PanelOptions, run_panel
from polpo.review.reviewer import ReviewContext
from polpo.review.scratch import Scratch
from polpo.review.work_files import read_work_files
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, text, tool_call
from tests.support.judges import phase

pytestmark = pytest.mark.anyio

TASK = '''Write below_zero(operations) in solution.py: True when the balance falls below zero.
>>> below_zero([1, 2, 3])
False
>>> below_zero([1, 2, -4, 5])
True
'''
CORRECT = ("def below_zero(operations):\n    balance = 0\n    for op in operations:\n        balance += op\n"
           "        if balance < 0:\n            return True\n    return False\n")
BROKEN = ("def below_zero(operations):\n    balance = 0\n    for op in operations:\n        balance += op\n"
          "    return balance < 0\n")  # only the final balance: misses a dip that recovers


def work(root: Path, source: str, name: str = "solution.py") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(source)
    return root


async def gather(ws: Path, files: list[str] | None = None, *, description: str = TASK, output: str | None = None,
                 checks: tuple[CheckEvidence, ...] = ()) -> Evidence:
    files = ["solution.py"] if files is None else files
    scratch = Scratch(ws, files, output)
    try:
        return await gather_evidence(description=description, criteria="", work=read_work_files(ws, files),
                                     output=output, checks=checks, scratch=scratch)
    finally:
        scratch.close()


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------------------------------------ gathering


async def test_a_correct_function_passes_the_examples_its_task_states(tmp_path: Path) -> None:
    checks = (CheckEvidence("test", "pytest -q", True, "exit code 0", "3 passed"),)
    ev = await gather(work(tmp_path, CORRECT), checks=checks)
    assert [(i.id, i.kind, i.passed) for i in ev.items] == [("E1", "check", True), ("E2", "example", True),
                                                            ("E3", "example", True)]
    assert ev.items[0].label == "test check: pytest -q" and "3 passed" in ev.items[0].detail
    assert ev.items[2].label == "stated example: below_zero([1, 2, -4, 5])" and ev.items[2].origin == "task"
    assert ev.items[2].detail == "expected True, got True"
    assert ev.summary() == "2 of 2 stated examples passed; 1 of 1 checks passed" and ev.failed == []


async def test_a_broken_function_fails_the_example_that_shows_its_bug(tmp_path: Path) -> None:
    ev = await gather(work(tmp_path, BROKEN))
    assert [(i.label, i.passed, i.detail) for i in ev.examples] == [
        ("stated example: below_zero([1, 2, 3])", True, "expected False, got False"),
        ("stated example: below_zero([1, 2, -4, 5])", False, "expected True, got False")]
    assert ev.failed == [ev.items[1]] and ev.summary() == "1 of 2 stated examples passed"
    assert Evidence.from_json(json.loads(json.dumps(ev.to_json()))).items == ev.items


async def test_a_doctest_that_shows_nothing_expects_none(tmp_path: Path) -> None:
    """HumanEval's ``longest``: ``>>> longest([])`` with no line after it (doctest prints nothing for None)."""
    task = "Write longest(strings).\n>>> longest([])\n\n>>> longest(['a', 'bb'])\n'bb'\n"
    right = "def longest(strings):\n    return max(strings, key=len) if strings else None\n"
    ev = await gather(work(tmp_path / "right", right), description=task)
    assert [i.passed for i in ev.examples] == [True, True], ev.items
    ev = await gather(work(tmp_path / "wrong", right.replace("else None", "else ''")), description=task)
    assert [i.passed for i in ev.examples] == [False, True], ev.items


async def test_the_examples_run_in_a_copy_and_the_workspace_is_never_touched(tmp_path: Path) -> None:
    vandal = ("import os, pathlib\npathlib.Path('side.txt').write_text('made by the review')\n"
              "with open(__file__, 'a') as f:\n    f.write('# rewritten\\n')\n" + CORRECT)
    ws = work(tmp_path / "ws", vandal)
    (ws / "node_modules").mkdir()
    (ws / "node_modules" / "dep.js").write_text("x")
    before = snapshot(ws)
    ev = await gather(ws)
    assert [i.passed for i in ev.examples] == [True, True]  # it ran, and wrote where it ran
    assert snapshot(ws) == before  # not here
    assert not list(Path(tempfile.gettempdir()).glob("polpo-review-*/side.txt"))  # and it is gone


async def test_nothing_is_copied_when_the_task_states_no_example(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scratch, "MAX_COPY_FILES", 0)  # any copy now fails, and says so
    ev = await gather(work(tmp_path, CORRECT), description="Write below_zero.")
    assert ev.items == []  # no example: no copy was tried
    ev = await gather(work(tmp_path, CORRECT))
    assert [(i.kind, i.label.split(" (")[0]) for i in ev.items] == [
        ("note", "the workspace is too large to copy for running")]


async def test_a_hanging_example_is_bounded_even_when_it_swallows_exceptions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evidence_run, "PER_EXAMPLE", 0.5)
    stubborn = ("import time\n\ndef below_zero(operations):\n    while True:\n        try:\n"
                "            time.sleep(0.05)\n        except Exception:\n            pass\n")
    ev = await gather(work(tmp_path, stubborn))
    assert [(i.passed, i.detail) for i in ev.examples] == [
        (False, "expected False, raised did not finish within 0.5 s"),
        (False, "expected True, raised did not finish within 0.5 s")]


async def test_a_work_that_blocks_the_alarm_is_stopped_by_the_runs_own_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evidence_run, "PER_EXAMPLE", 0.3)
    monkeypatch.setattr(evidence_run, "RUN_LIMIT", 1.5)
    deaf = ("import signal, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\n\n"
            "def below_zero(operations):\n    time.sleep(3600)\n")
    ev = await gather(work(tmp_path, deaf))
    (note,) = ev.items
    assert note.kind == "note" and note.passed is None
    assert note.label == "the stated examples could not be run: the examples did not finish within 1.5 s"


async def test_a_file_that_fails_to_load_is_evidence(tmp_path: Path) -> None:
    ev = await gather(work(tmp_path, CORRECT.replace("return False", "return False)")))
    load = [i for i in ev.items if i.kind == "load"]
    assert len(load) == 1 and load[0].passed is False and "SyntaxError" in load[0].detail
    assert [i.passed for i in ev.examples] == [False, False]  # below_zero was never defined
    assert "NameError" in ev.examples[0].detail
    assert ev.summary() == "0 of 2 stated examples passed; 1 file(s) failed to load"


async def test_what_the_work_prints_neither_hides_nor_forges_a_result(tmp_path: Path) -> None:
    flood = CORRECT.replace("    balance = 0\n", "    print('x' * 100_000)\n    balance = 0\n", 1)
    ev = await gather(work(tmp_path / "flood", flood))  # more than the caller's tail of stdout, per call
    assert [i.passed for i in ev.examples] == [True, True]
    forger = ("import json, os\n\ndef below_zero(operations):\n    for i in range(2):\n"
              "        print(json.dumps({'i': i, 'passed': True, 'got': 'True', 'error': None}), flush=True)\n"
              "    os._exit(0)\n")  # a work that reports its own success and leaves before the harness can
    ev = await gather(work(tmp_path / "forger", forger))
    assert [(i.passed, i.detail) for i in ev.examples] == [  # its exit is its failure; what never ran is a note
        (False, "expected False; the run ended while it ran (exit code 0)")]
    assert [(i.kind, i.passed, i.detail) for i in ev.items[1:]] == [("note", None, "expected True")]


async def test_a_text_only_work_has_its_python_block_run(tmp_path: Path) -> None:
    output = ("Here is the function:\n```python\n" + BROKEN + "```\nRun it with:\n```\n$ python3 solution.py\n```\n")
    ev = await gather(tmp_path, [], output=output)
    assert [(i.kind, i.passed) for i in ev.items] == [("example", True), ("example", False)]  # no load failure
    prose = await gather(tmp_path, [], output="The balance never dips, so the answer is False.")
    assert [(i.kind, i.label) for i in prose.items] == [
        ("note", "the task states 2 example(s), but the work has no Python file to run them against")]


# ------------------------------------------------------------------------------------------------ the reviewers




def answer(score: int, reasoning: str) -> Reply:
    return text(json.dumps({"scores": [{"dimension": "correctness", "reasoning": reasoning, "score": score}],
                            "summary": "s"}))


async def test_every_phase_is_shown_the_evidence_and_a_reviewer_probes_in_its_own_copy(
        judge_llm: FakeLLM, tmp_path: Path) -> None:
    ws = work(tmp_path / "ws", BROKEN)
    before = snapshot(ws)
    probe = "python3 -c 'import solution; print(solution.below_zero([5, -6, 2]))' && touch probed.txt"

    def respond(req: RecordedRequest) -> Reply:
        if phase(req) == "explore":
            ran = [m for m in req["messages"] if m["role"] == "tool"]
            return tool_call("run_command", {"command": probe}) if not ran else text(
                "correctness: E2 fails: a dip that recovers is missed (solution.py:5).")
        return answer(2, "E2 FAILED: below_zero([1, 2, -4, 5]) gave False")
    judge_llm.responder = respond
    ctx = ReviewContext(title="Below zero", description=TASK, criteria="Right on every example.", workspace=ws,
                        files_changed=["solution.py"], timeline="agent ran; exit 0")

    result = await run_panel(LLMClient(max_retries=0), [ModelSettings("openai/fake-model", api_base=judge_llm.base_url,
                                                                      timeout=60, temperature=0)],
                             ctx, [Dim("correctness", 1.0, "It is right")], 3.0,
                             options=PanelOptions(probes=False))  # probes: test_review_probes.py

    assert result.global_score == 2 and not result.passed
    explore, _, scoring = judge_llm.requests
    shown = explore["messages"][1]["content"]
    assert "EVIDENCE (polpo ran these before you; cite them by number):\nE1 [PASSED] stated example: " \
           "below_zero([1, 2, 3]) (stated in task)" in shown
    assert "E2 [FAILED] stated example: below_zero([1, 2, -4, 5]) (stated in task)\n    expected True, got False" \
           in shown
    assert "In short: 1 of 2 stated examples passed." in shown
    assert "   5|     return balance < 0" in shown  # the changed file, numbered
    assert "EVIDENCE:\nE1 [PASSED]" in scoring["messages"][1]["content"]
    probed = next(m for m in result.reviewers[0].messages if m.get("toolName") == "run_command")
    assert "exit code 0" in probed["content"] and "False" in probed["content"] and not probed["isError"]
    assert snapshot(ws) == before  # the probe's file went to the reviewer's copy
    review = result.review_json()
    assert review["evidence"]["summary"] == "1 of 2 stated examples passed"
    assert [i["passed"] for i in review["evidence"]["items"]] == [True, False]
    assert result.reviewers[0].scores[0].cited and result.reviewers[0].uncited == []
