"""Work the judge cannot decide, on a real `polpo daemon` process: a one-seat judge over real HTTP (FakeLLM) scores
3 and a calibrated rule (``passAt`` 4, ``failBelow`` 2) sends 3 to a person. The task waits ``awaiting_review``,
a notify rule delivers ``assessment:needs-person`` to a file channel, and ``polpo status`` / ``polpo show`` say why
and how to answer. kill -9 while it waits: after the restart it still waits and nothing runs again; a person
passes one task from the CLI and fails another over HTTP (a page of another origin cannot), which ends it as a
failed assessment would (it has no fix or retry left), and ``polpo labels export`` writes both verdicts as labels. The task page shows the review —
the reason, the score, the evidence polpo ran, each dimension's reasoning — and its Approve and Fail buttons act,
in Debian's chromium.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.browser import page_on_a_daemon
from tests.support.daemon import daemon_process, mission_json, run_cli, shell_task, wait_events, write_config
from tests.support.fake_llm import FakeLLM, text
from tests.support.judges import ScriptedJudge, rule_calibration

pytestmark = pytest.mark.slow

REVIEW = {"type": "llm_review", "criteria": "out.txt greets the user", "threshold": 3.0,
          "dimensions": [{"name": "greets", "weight": 1.0, "description": "Does it greet the user?"}]}


@pytest.fixture
def judge() -> Iterator[FakeLLM]:
    with FakeLLM() as srv:
        srv.responder = ScriptedJudge(score=3.0)
        yield srv


def configured(root: Path, srv: FakeLLM) -> Path:
    cal = rule_calibration(root)  # passAt 4, failBelow 2: the judge's 3 goes to a person
    return write_config(root, extra=f"""
[judge]
model = "openai/fake-model"
api_base = "{srv.base_url}"
seats = 1
uncertain_band = 0
correct_expectations = false
calibration = "{cal}"

[http]
listen = "127.0.0.1:0"
token_env = "PERSON_REVIEW_TEST_NO_TOKEN"

[channels.people]
type = "file"
path = "people.jsonl"

[[notify.rules]]
events = ["assessment:needs-person"]
channels = ["people"]
""")


def greets(title: str, **fields: Any) -> dict[str, Any]:
    return shell_task(title, f"echo hello from {title} > out-{title}.txt",
                      expectations=[{"type": "file_exists", "path": f"out-{title}.txt"}, REVIEW], **fields)


def has(name: str, n: int = 1, **match: Any) -> Any:
    return lambda evs: sum(e["event"] == name and all(e.get(k, e["data"].get(k)) == v for k, v in match.items())
                           for e in evs) >= n


def count(evs: list[dict[str, Any]], name: str, after: int = 0) -> int:
    return sum(1 for e in evs[after:] if e["event"] == name)


def test_a_review_waits_through_kill_9_and_a_persons_verdicts_become_labels(tmp_path: Path, judge: FakeLLM) -> None:
    config = configured(tmp_path, judge)
    state = tmp_path / "state"
    (tmp_path / "missions" / "rev.json").write_text(mission_json(  # two: no fix or retry left after a fail
        greets("one"), greets("two", maxRetries=0, maxFixAttempts=0), name="rev"))
    with daemon_process(config) as proc:
        wait_events(state, has("assessment:needs-person", 2), timeout=90)
        wait_events(state, lambda es: len((config.parent / "people.jsonl").read_text().splitlines()) == 2
                    if (config.parent / "people.jsonl").exists() else False)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    sent = [json.loads(line) for line in (config.parent / "people.jsonl").read_text().splitlines()]
    assert sorted(s["taskId"] for s in sent) == ["rev:1", "rev:2"]
    assert "polpo approve rev:1" in json.dumps(sent) and "polpo reject rev:2 --reason TEXT" in json.dumps(sent)

    status = run_cli("status", "--config", str(config)).stdout
    assert "running" in status and "waiting for a person's review of 2 tasks: rev:1, rev:2" in status, status
    shown = run_cli("show", "rev:1", "--config", str(config)).stdout
    assert "status waiting for review — waiting for a person's review: llm_review #2: score 3.00 is between" in shown
    assert "`polpo approve rev:1` passes it, `polpo reject rev:1 --reason TEXT` fails it" in shown, shown
    as_json = json.loads(run_cli("status", "--json", "--config", str(config)).stdout)
    assert as_json["missions"][0]["awaitingReview"] == ["rev:1", "rev:2"]

    before = wait_events(state, lambda es: True)
    calls = len(judge.requests)
    with daemon_process(config):
        evs = wait_events(state, has("orchestrator:started", 2))
        url = json.loads((state / "http.json").read_text())["url"]
        st = run_cli("status", "--config", str(config)).stdout  # both tasks still wait, after the restart
        assert len(re.findall(r"^ +rev:[12] +waiting for review ", st, re.M)) == 2, st
        out = run_cli("approve", "rev:1", "--score", "4", "--note", "greets well", "--by", "ada",
                      "--config", str(config))
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "rev:1: passed by ada; it is done once its assessment completes"
        wait_events(state, has("task:transition", taskId="rev:1", to="done"))
        assert len(judge.requests) == calls  # the same assessment completed: no reviewer ran for the verdict
        forged = httpx.post(f"{url}/api/tasks/rev:2/reject", json={"reason": "x"}, timeout=30,
                            headers={"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"})
        assert forged.status_code == 403, forged.text  # a page of another origin cannot give a verdict
        r = httpx.post(f"{url}/api/tasks/rev:2/reject", json={"reason": "it must greet by name", "by": "bob"},
                       timeout=30)
        assert r.status_code == 200, r.text
        assert r.json()["message"] == "rev:2: failed by bob; a fix, a retry or the end follows, as after a failed " \
                                      "assessment"
        evs = wait_events(state, has("mission:completed", missionId="rev"), timeout=60)
    restart = len(before)
    assert count(evs, "task:recovered", restart) == 0  # waiting is not a crashed turn: nothing resumed
    assert count(evs, "agent:spawned", restart) == 0 and count(evs, "assessment:started", restart) == 0
    assert len(judge.requests) == calls
    tasks = {t["id"]: t for t in json.loads(run_cli("show", "rev", "--json", "--config", str(config)).stdout)["tasks"]}
    assert (tasks["rev:1"]["status"], tasks["rev:1"]["score"]) == ("done", 4.0)  # the person's score
    assert tasks["rev:2"]["status"] == "failed" and "failed by bob, a person: it must greet by name" in \
        tasks["rev:2"]["reason"]  # no fix or retry left: it ends as a failed assessment would
    assert next(e for e in evs if e["event"] == "mission:completed")["data"]["outcome"] == "failed"
    shown = run_cli("show", "rev:1", "--config", str(config)).stdout
    assert "reviewed by ada at " in shown and ": pass (the judge could not tell; score 4 for the label): greets well" \
        in shown, shown
    verdicts = [(e["taskId"], e["data"]["passed"], e["data"]["by"]) for e in evs
                if e["event"] == "assessment:person-verdict"]
    assert verdicts == [("rev:1", True, "ada"), ("rev:2", False, "bob")]

    labels = tmp_path / "labels" / "people.jsonl"
    labels.parent.mkdir()
    out = run_cli("labels", "export", "--out", str(labels), "--config", str(config))
    assert out.returncode == 0, out.stderr
    lines = {x["id"]: x for x in map(json.loads, labels.read_text().splitlines())}
    assert (lines["rev:1"]["score"], lines["rev:1"]["verdict"], lines["rev:1"]["judgeVerdict"]) == (4.0, "pass", None)
    assert (lines["rev:2"]["score"], lines["rev:2"]["verdict"], lines["rev:2"]["reason"]) == (
        1.0, "fail", "it must greet by name")
    assert lines["rev:1"]["task"] == "echo hello from one > out-one.txt" and lines["rev:1"]["judgeScore"] == 3.0
    assert (labels.parent / lines["rev:1"]["workspace"]).resolve() == (state / "workspaces" / "rev").resolve()


def test_the_task_page_shows_the_review_and_its_approve_and_fail_buttons_act(tmp_path: Path,
                                                                            judge: FakeLLM) -> None:
    config = configured(tmp_path, judge)
    state = tmp_path / "state"
    with page_on_a_daemon(config) as (browser, url):
        (tmp_path / "missions" / "page.json").write_text(mission_json(greets("one"), greets("two"), name="page"))
        wait_events(state, has("assessment:needs-person", 2), timeout=90)
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.goto(url + "/#/mission/page")  # the mission page says what it waits for
        page.wait_for_selector('#awaiting-review[data-tasks="page:1,page:2"]')
        page.click('#awaiting-review a:text("page:1")')
        page.wait_for_selector('#task-summary[data-status="awaiting_review"]')
        review = page.inner_text("#review-wait")
        assert "score 3.00 is between 2.00 and 4.00" in page.inner_text("#review-why")
        assert page.inner_text("#review-score").startswith("panel score 3.00")
        assert "out-one.txt" in page.inner_text("#review-wait li[data-evidence]"), review  # the check polpo ran
        assert "greets looks ok" in page.inner_text('#review-wait li[data-dimension="greets"]')
        page.fill("#approve-note", "checked by hand")
        page.click("#approve")
        page.wait_for_selector('#answer[data-state="done"]')
        page.wait_for_selector('#task-summary[data-status="done"]')
        assert page.locator("#review-wait").count() == 0
        assert "reviewed by a person (the judge could not tell) to pass by api: checked by hand" in \
            page.inner_text("#override-note")

        assert isinstance(judge.responder, ScriptedJudge)
        judge.responder.score = 5.0
        page.goto(url + "/#/task/page:2")
        page.wait_for_selector('#task-summary[data-status="awaiting_review"]')
        page.fill("#fail-reason", "say hello by name")
        page.click("#fail")
        page.wait_for_selector('#answer[data-state="done"]')
        page.wait_for_selector('#task-summary[data-status="done"]', timeout=60_000)
        evs = wait_events(state, has("mission:completed", missionId="page"), timeout=60)
    verdicts = {e["taskId"]: e["data"] for e in evs if e["event"] == "assessment:person-verdict"}
    assert verdicts["page:1"] == {"attempt": 1, "passed": True, "score": None, "reason": "checked by hand",
                                  "by": "api"}
    assert (verdicts["page:2"]["passed"], verdicts["page:2"]["reason"]) == (False, "say hello by name")
    assert [e["data"]["kind"] for e in evs if e["event"] == "agent:spawned" and e["taskId"] == "page:2"] == [
        "initial", "fix"]


HAS_CLOSE = '''cat > solution.py <<'EOF'
def has_close(numbers, threshold):
    """True if any two numbers are closer than threshold.
    >>> has_close([1.0, 2.0, 3.0], 0.5)
    False
    >>> has_close([1.0, 2.8, 3.0, 4.0], 0.3)
    True
    """
    for a, b in zip(numbers, numbers[1:]):
        if abs(a - b) < threshold:
            return True
    return False
EOF
'''
JUDGES_OWN = ("def has_close(numbers, threshold):\n    for i, a in enumerate(numbers):\n"
              "        for j, b in enumerate(numbers):\n            if i != j and abs(a - b) < threshold:\n"
              "                return True\n    return False\n")


def test_a_dispute_waits_for_a_person_who_sees_the_judges_own_code(tmp_path: Path, judge: FakeLLM) -> None:
    """The work (it compares neighbours only) passes both stated examples, the panel scores it 5, and only the
    judge's own has_close disagrees with it: a dispute, which the rule leaves to a person. ``polpo show`` and the
    task page give the person the score before the bound, the inputs with both answers, and the judge's code."""
    scripted = ScriptedJudge(score=5.0)
    judge.responder = lambda req: (text(f"```python\n{JUDGES_OWN}```") if "from its description alone" in
                                   str(req["messages"][-1]["content"]) else scripted(req))
    config = configured(tmp_path, judge)
    state = tmp_path / "state"
    with page_on_a_daemon(config) as (browser, url):
        (tmp_path / "missions" / "dis.json").write_text(mission_json(shell_task(
            "has_close", HAS_CLOSE, expectations=[{**REVIEW, "criteria": "solution.py implements has_close"}]),
            name="dis"))
        evs = wait_events(state, has("assessment:needs-person"), timeout=90)
        need = next(e for e in evs if e["event"] == "assessment:needs-person")["data"]
        assert "the judge's own code disagree" in need["reason"], need
        shown = run_cli("show", "dis:1", "--config", str(config)).stdout
        assert "[DIFFERS] probe: has_close(" in shown and "the work gives False" in shown, shown
        assert "a dispute: only the judge's own code is against the work" in shown and "without it: 5.00" in shown
        assert "the judge's own has_close:" in shown and "|             if i != j and abs(a - b) < threshold:" in shown
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.goto(url + "/#/task/dis:1")
        page.wait_for_selector('#task-summary[data-status="awaiting_review"]')
        assert "the panel's score without it: 5.00" in page.inner_text("#review-dispute")
        assert "if i != j and abs(a - b) < threshold" in page.inner_text("#judge-code")
        assert "the work gives False" in page.inner_text('#review-wait li[data-passed="false"]')
