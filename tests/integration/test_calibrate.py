"""Calibration: the agreement statistics against values computed by hand, and ``polpo calibrate`` on the labelled
set shipped in tests/fixtures/calibration, with a judge over real HTTP whose scores follow the work.

The shipped set (human scores) and what the heuristic judge gives (1 + one per marker: ``return``, ``[::-1]``,
a docstring, ``->``), reviewer b one point more (clamped):

    item         human  a = c = panel  b
    refused        1        1          2
    prints         2        1          2
    loop           3        2          3
    slice          4        3          4
    typed (dir)    5        5          5
    typed-loop     3        4          5

Panel vs human, by hand:
* Spearman: human ranks [1, 2, 3.5, 5, 6, 3.5], panel ranks [1.5, 1.5, 3, 4, 6, 5]; both means 3.5;
  Σ dh·dp = 5 + 3 + 0 + 0.75 + 6.25 + 0 = 15, Σ dh² = 17, Σ dp² = 17 → ρ = 15/17 = 0.882353.
* κ (quadratic, w = (i − j)²/16): observed Σ w·O = 4 · 1/16 = 0.25; expected Σ w·r_i·c_j/N with panel counts
  {1: 2, 2: 1, 3: 1, 4: 1, 5: 1} and human counts {1: 1, 2: 1, 3: 2, 4: 1, 5: 1} is (68 + 16 + 10 + 16 + 34)/16/6
  = 1.5 → κ = 1 − 0.25/1.5 = 5/6 = 0.833333.
* bias: (0 − 1 − 1 − 1 + 0 + 1)/6 = −1/3.
* line: panel mean 8/3, human mean 3, Σ dx·dy = 10, Σ dx² = 40/3 → scale 0.75, bias 3 − 0.75 · 8/3 = 1.
Reviewer b: κ = 1 − (5/16)/(126/96) = 16/21 = 0.761905; ρ = 13.75/√(16.5 · 17) = 0.820993; bias +0.5.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polpo.assessment.calibrate import read_labels
from polpo.config import load_config
from polpo.review.calibration import (
    Calibration,
    level,
    linear_fit,
    load_calibration,
    spearman,
    weighted_kappa,
)
from tests.support.daemon import polpo_cmd, run_cli, write_config
from tests.support.fake_llm import FakeLLM, RecordedRequest
from tests.support.judges import HeuristicJudge, phase

LABELS = Path(__file__).resolve().parents[1] / "fixtures" / "calibration" / "labels.jsonl"
HUMAN = [1, 2, 3, 4, 5, 3]
PANEL = [1, 1, 2, 3, 5, 4]
B = [2, 2, 3, 4, 5, 5]
KEY_ENV = "POLPO_CALIBRATE_KEY"


def test_statistics_match_the_hand_computed_values() -> None:
    assert spearman(PANEL, HUMAN) == pytest.approx(15 / 17)
    assert weighted_kappa(PANEL, HUMAN) == pytest.approx(5 / 6)
    assert weighted_kappa(B, HUMAN) == pytest.approx(16 / 21)
    assert spearman(B, HUMAN) == pytest.approx(13.75 / math.sqrt(16.5 * 17))
    assert linear_fit(PANEL, HUMAN) == (pytest.approx(0.75), pytest.approx(1.0))


def test_statistics_edge_cases() -> None:
    assert weighted_kappa([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]) == 1.0
    assert weighted_kappa([1, 5], [5, 1]) == pytest.approx(-1.0)  # complete, maximal disagreement
    assert weighted_kappa([3, 3], [3, 3]) is None  # no disagreement possible by chance: undefined
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([4, 4, 4], [1, 2, 3]) is None
    assert linear_fit([4, 4], [1, 5]) is None
    assert [level(x) for x in (1.0, 2.49, 2.5, 4.75, 0.2, 7)] == [1, 2, 3, 5, 1, 5]


def test_a_calibration_maps_and_clamps(tmp_path: Path) -> None:
    cal = Calibration(0.75, 1.0)
    assert (cal.apply(1), cal.apply(4), cal.apply(5)) == (1.75, 4.0, 4.75)
    assert Calibration(2.0, 0.0).apply(4) == 5.0
    f = tmp_path / "cal.json"
    f.write_text('{"scale": 0.75, "bias": 1}')
    assert load_calibration(f).scale == 0.75
    f.write_text('{"scale": -1, "bias": 1}')
    with pytest.raises(ValueError, match="positive number"):
        load_calibration(f)


def test_the_shipped_labels_read_and_a_bad_file_names_its_lines(tmp_path: Path) -> None:
    items = read_labels(LABELS)
    assert [i.human for i in items] == HUMAN
    assert items[4].workspace is not None and items[4].workspace.name == "typed"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task": "t", "output": "x", "score": 9}\nnot json\n{"task": "t", "score": 3}\n')
    with pytest.raises(ValueError) as e:
        read_labels(bad)
    lines = str(e.value).splitlines()
    assert [ln.split(":")[1] for ln in lines] == ["1", "2", "3"]
    assert "from 1 to 5" in lines[0] and 'exactly one of "output"' in lines[2]


@pytest.fixture
def judge(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv(KEY_ENV, "sk-calibrate")
    with FakeLLM(models=("fake-a", "fake-b", "fake-c")) as srv:
        srv.responder = HeuristicJudge(offsets={"fake-b": 1})
        yield srv


def judge_config(tmp_path: Path, srv: FakeLLM, extra: str = "") -> Path:
    return write_config(tmp_path, extra=f"""
[judge]
models = ["openai/fake-a", "openai/fake-b", "openai/fake-c"]
api_base = "{srv.base_url}"
api_key_env = "{KEY_ENV}"
{extra}
[llm]
max_retries = 0
""")


def test_polpo_calibrate_prints_kappa_and_spearman_for_the_shipped_set(tmp_path: Path, judge: FakeLLM) -> None:
    config = judge_config(tmp_path, judge)
    out = tmp_path / "calibration.json"
    res = run_cli("calibrate", str(LABELS), "--write", str(out), "--config", str(config),
                  env={KEY_ENV: "sk-calibrate"})
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("calibration: 6/6 labelled item(s)")
    assert lines[2].split() == ["panel", "6", "0.882", "0.833", "-0.333"]
    assert lines[3].split() == ["reviewer", "0", "6", "0.882", "0.833", "-0.333"]
    assert lines[4].split() == ["reviewer", "1", "6", "0.821", "0.762", "+0.500"]
    assert "panel vs a single reviewer: kappa 0.833 vs 0.810 mean (0.833 best)" in res.stdout
    assert "linear calibration: human ≈ 0.75 · panel +1" in res.stdout
    saved = json.loads(out.read_text())
    assert (saved["scale"], saved["bias"], saved["items"]) == (0.75, 1.0, 6)
    # the typed item was a workspace: its reviewers read the file with the read-only tools
    assert any(r.get("tools") and any(m.get("role") == "tool" for m in r["messages"]) for r in judge.requests)
    as_json = json.loads(run_cli("calibrate", str(LABELS), "--json", "--config", str(config),
                                 env={KEY_ENV: "sk-calibrate"}).stdout)
    assert as_json["panel"] == {"n": 6, "spearman": 0.882353, "kappa": 0.833333, "bias": -0.333333}
    assert [r["panel"] for r in as_json["results"]] == PANEL
    # the written file is a valid [judge] calibration
    cfg = load_config(judge_config(tmp_path / "with", judge, f'calibration = "{out}"'))
    assert cfg.judge.calibration == out


def test_seats_1_measures_one_reviewer_on_the_same_labels(tmp_path: Path, judge: FakeLLM) -> None:
    config = judge_config(tmp_path, judge, "max_turns = 4")
    one = json.loads(run_cli("calibrate", str(LABELS), "--seats", "1", "--json", "--config", str(config),
                             env={KEY_ENV: "sk-calibrate"}).stdout)
    assert list(one["reviewers"]) == ["0"] and one["scored"] == 6
    assert one["panel"] == one["reviewers"]["0"] == {"n": 6, "spearman": 0.882353, "kappa": 0.833333,
                                                      "bias": -0.333333}  # reviewer a alone
    assert {r["model"] for r in judge.requests} == {"fake-a"}
    judge.reset()
    judge.responder = HeuristicJudge(offsets={"fake-b": 1})
    three = json.loads(run_cli("calibrate", str(LABELS), "--seats", "3", "--json", "--config", str(config),
                               env={KEY_ENV: "sk-calibrate"}).stdout)
    assert list(three["reviewers"]) == ["0", "1", "2"] and three["panel"]["kappa"] == 0.833333
    assert three["reviewers"]["1"]["kappa"] == 0.761905


def test_nothing_scored_says_why_and_the_write_hint_works_from_any_folder(
        tmp_path: Path, judge: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    config = judge_config(tmp_path, judge)
    out = tmp_path / "cal.json"
    monkeypatch.delenv(KEY_ENV)
    res = run_cli("calibrate", str(LABELS), "--write", str(out), "--config", str(config))  # the key is unset
    assert res.returncode != 0 and not out.exists()
    assert "no item could be scored" in res.stderr and KEY_ENV in res.stderr, res.stderr
    assert "same score" not in res.stderr
    res = run_cli("calibrate", str(LABELS), "--write", "cal.json", "--config", str(config),
                  env={KEY_ENV: "sk-calibrate"}, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert f'[judge] calibration = "{tmp_path / "cal.json"}"' in res.stdout


def test_a_stopped_run_keeps_its_items_and_resume_continues_it(tmp_path: Path, judge: FakeLLM) -> None:
    config = judge_config(tmp_path, judge)
    results = tmp_path / "kept.jsonl"
    heuristic = HeuristicJudge(offsets={"fake-b": 1})
    gate, lock, first_calls = threading.Event(), threading.Lock(), [0]

    def slow_after_two_items(req: RecordedRequest) -> Any:
        if phase(req) in ("output", "explore"):
            with lock:
                first_calls[0] += 1
                n = first_calls[0]
            if n > 6:  # items run one at a time, three reviewers each: the third item hangs
                gate.wait(60)
        return heuristic(req)

    judge.responder = slow_after_two_items
    cmd = polpo_cmd("calibrate", str(LABELS), "--results", str(results), "--config", str(config))
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, KEY_ENV: "sk-calibrate"})
    try:
        deadline = time.monotonic() + 60  # a bound on the wait, not a speed check
        while not (results.is_file() and len(results.read_text().splitlines()) >= 2):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the first two items never finished")
            time.sleep(0.05)
    finally:
        proc.kill()
        _, stderr = proc.communicate(timeout=30)
        gate.set()
    kept = [json.loads(line) for line in results.read_text().splitlines()]
    assert [k["id"] for k in kept] == ["refused", "prints"] and [k["panel"] for k in kept] == PANEL[:2]
    assert "[1/6] refused: panel 1.00 (human 1)" in stderr and "[2/6] prints: panel 1.00 (human 2)" in stderr
    assert "s per item, about" in stderr and "left" in stderr

    judge.reset()
    judge.responder = heuristic
    res = run_cli("calibrate", str(LABELS), "--results", str(results), "--resume", "--config", str(config),
                  env={KEY_ENV: "sk-calibrate"})
    assert res.returncode == 0, res.stderr
    first = next(line for line in res.stderr.splitlines() if line.startswith("[1/6] refused: panel 1.00 (human 1)"))
    assert first.endswith("(from the results file)"), res.stderr
    assert "[6/6] typed-loop: panel 4.00" in res.stderr
    assert res.stdout.splitlines()[2].split() == ["panel", "6", "0.882", "0.833", "-0.333"]  # as a whole run
    assert not any("print(s)" in json.dumps(r["messages"]) for r in judge.requests)  # item 2 not run again
    assert len(results.read_text().splitlines()) == 6


def test_a_rule_is_reported_with_its_passes_fails_and_persons_and_says_whether_it_saw_these_labels(
        tmp_path: Path, judge: FakeLLM) -> None:
    config = judge_config(tmp_path, judge)
    out = tmp_path / "rule.json"
    fitted = run_cli("calibrate", str(LABELS), "--write", str(out), "--max-false-pass", "0.1", "--config",
                     str(config), "--results", str(tmp_path / "r.jsonl"), env={KEY_ENV: "sk-calibrate"})
    assert fitted.returncode == 0, fitted.stderr
    rule = json.loads(out.read_text())["rule"]
    # panel scores [1, 1, 2, 3, 5, 4]; the two broken items (human 1 and 2) both score 1: passing starts above
    # them at 1.5, and no good item scores under it
    assert (rule["passAt"], rule["failBelow"], rule["onLabels"]["person"]) == (1.5, 1.5, 0)
    assert rule["fittedToTheseLabels"] is True
    assert "on these labels: 4 passed, 2 failed, 0 sent to a person; false passes 0/2 broken" in fitted.stdout
    assert "counted on the labels the rule was fitted to: an in-sample estimate" in fitted.stdout
    assert "note: 2 broken item(s) cannot show a false-pass rate under 0.1 with 95% confidence (that takes 29" \
        in fitted.stdout
    # the same rule, narrowed by hand, measured on these labels as unseen work: the 3 goes to a person
    held = tmp_path / "held.json"
    held.write_text(json.dumps({**json.loads(out.read_text()), "rule": {**rule, "passAt": 3.5, "failBelow": 2.5}}))
    given = run_cli("calibrate", str(LABELS), "--rule", str(held), "--config", str(config), "--results",
                    str(tmp_path / "r.jsonl"), "--resume", env={KEY_ENV: "sk-calibrate"})
    assert given.returncode == 0, given.stderr
    assert "on these labels: 2 passed, 3 failed, 1 sent to a person; false passes 0/2 broken" in given.stdout
    assert "counted on labels the rule was not fitted to: a measure on unseen work" in given.stdout
    assert "fitted to: an in-sample" not in given.stdout

    # --report-only: the same report from the results file alone, with the judge gone; nothing is scored
    asked = len(judge.requests)
    only = run_cli("calibrate", str(LABELS), "--rule", str(held), "--config", str(config), "--results",
                   str(tmp_path / "r.jsonl"), "--report-only", env={KEY_ENV: "sk-calibrate"})
    assert only.returncode == 0, only.stderr
    assert len(judge.requests) == asked and "6 scored in" in only.stderr and "nothing is scored now" in only.stderr
    assert "on these labels: 2 passed, 3 failed, 1 sent to a person; false passes 0/2 broken" in only.stdout
    kept = (tmp_path / "r.jsonl").read_text().splitlines()
    (tmp_path / "part.jsonl").write_text("\n".join(kept[:4]) + "\n")  # two items never scored: said, not scored
    part = run_cli("calibrate", str(LABELS), "--config", str(config), "--results", str(tmp_path / "part.jsonl"),
                   "--report-only", "--json", env={KEY_ENV: "sk-calibrate"})
    assert part.returncode == 0, part.stderr
    rep = json.loads(part.stdout)
    assert rep["scored"] == 4 and len(judge.requests) == asked
    assert [f["error"] for f in rep["failed"]] == ["not in the results file (--report-only)"] * 2
    missing = run_cli("calibrate", str(LABELS), "--config", str(config), "--results", str(tmp_path / "none.jsonl"),
                      "--report-only", env={KEY_ENV: "sk-calibrate"})
    assert missing.returncode != 0 and "no results file at" in missing.stderr
