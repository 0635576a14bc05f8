"""Human verdicts on a real `polpo daemon` process with a judge panel over real HTTP (FakeLLM): a person overrides a
task's verdict through the CLI (the command inbox) and the HTTP API; it is stored beside the judge's scores, shown
by `polpo show`, and `polpo labels export` writes a file that `polpo calibrate` reads and scores. A pass of work
the judge failed makes the task done and the mission completes again.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.daemon import daemon_process, mission_json, run_cli, shell_task, wait_events, write_config
from tests.support.fake_llm import FakeLLM
from tests.support.judges import HeuristicJudge

KEY_ENV = "POLPO_OVERRIDE_KEY"
REVIEW = {"type": "llm_review", "criteria": "reverse(s) returns s reversed", "threshold": 3.0,
          "dimensions": [{"name": "correctness", "weight": 1.0, "description": "Is it right?"}]}
GOOD = "printf 'def reverse(s) -> str:\\n    \"\"\"Reversed.\"\"\"\\n    return s[::-1]\\n' > rev.py"
WEAK = "printf 'def reverse(s):\\n    print(s)\\n' > rev.py"


@pytest.fixture
def judge(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv(KEY_ENV, "sk-override")
    with FakeLLM(models=("fake-a", "fake-b", "fake-c")) as srv:
        srv.responder = HeuristicJudge()
        yield srv


def test_an_override_is_stored_shown_and_exported_as_labels_calibrate_reads(tmp_path: Path, judge: FakeLLM) -> None:
    config = write_config(tmp_path, extra=f"""
[judge]
models = ["openai/fake-a", "openai/fake-b", "openai/fake-c"]
api_base = "{judge.base_url}"
api_key_env = "{KEY_ENV}"
correct_expectations = false

[http]
listen = "127.0.0.1:0"
token_env = "OVERRIDE_TEST_NO_TOKEN"
""")
    state = tmp_path / "state"
    (tmp_path / "missions" / "rev.json").write_text(mission_json(
        shell_task("good", GOOD, expectations=[REVIEW]), shell_task("weak", WEAK, expectations=[REVIEW], dependsOn=["good"]),
        name="rev"))
    with daemon_process(config, env={KEY_ENV: "sk-override"}):
        wait_events(state, lambda es: any(e["event"] == "mission:completed" for e in es), timeout=90)
        refused = run_cli("override", "rev:1", "--reason", "x", "--config", str(config))
        assert refused.returncode != 0 and "give --pass or --fail" in refused.stderr
        out = run_cli("override", "rev:1", "--fail", "--score", "2", "--reason", "no tests for unicode", "--by",
                      "ada", "--config", str(config))
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "rev:1: verdict overridden to fail (its checks said pass)"
        url = json.loads((state / "http.json").read_text())["url"]
        r = httpx.post(f"{url}/api/tasks/rev:2/override", json={"passed": True, "reason": "fine for a script",
                                                                 "by": "bob"}, timeout=30)
        assert r.status_code == 200, r.text
        assert r.json()["message"].endswith("; rev:2 is done")  # a person's pass counts: the work is done
        evs = wait_events(state, lambda es: sum(e["event"] == "mission:completed" for e in es) == 2)
        task_page = httpx.get(f"{url}/api/tasks/rev:1", timeout=30).json()
        passed_page = httpx.get(f"{url}/api/tasks/rev:2", timeout=30).json()
    assert task_page["override"]["byPerson"] == "ada" and task_page["override"]["passed"] == 0
    assert task_page["status"] == "done"  # a fail over a passed task leaves it: the work after it used it
    assert (passed_page["status"], passed_page["score"]) == ("done", 5.0)
    first, again = [e["data"]["outcome"] for e in evs if e["event"] == "mission:completed"]
    assert (first, again) == ("failed", "completed")
    [resumed] = [e["data"] for e in evs if e["event"] == "mission:resumed"]
    assert resumed == {"by": "override", "taskId": "rev:2"}
    assert [(e["data"]["from"], e["data"]["to"], e["data"]["trigger"]) for e in evs
            if e["event"] == "task:transition" and e["taskId"] == "rev:2"][-1] == ("failed", "done", "human_pass")
    over = [e for e in evs if e["event"] == "task:verdict:overridden"]
    assert [(e["taskId"], e["data"]["passed"], e["data"]["wasPassed"], e["data"]["by"]) for e in over] == [
        ("rev:1", False, True, "ada"), ("rev:2", True, False, "bob")]
    con = sqlite3.connect(state / "polpo.db")
    stored = con.execute("SELECT task_id, passed, score, judge_passed, judge_score IS NOT NULL, by_person "
                         "FROM overrides ORDER BY task_id").fetchall()
    assert stored == [("rev:1", 0, 2.0, 1, 1, "ada"), ("rev:2", 1, 5.0, 0, 0, "bob")]

    shown = run_cli("show", "rev:1", "--config", str(config)).stdout
    assert "verdict overridden to fail by ada" in shown and "(its checks said pass): no tests for unicode" in shown

    labels = tmp_path / "labels" / "people.jsonl"
    labels.parent.mkdir()
    out = run_cli("labels", "export", "--out", str(labels), "--config", str(config))
    assert out.returncode == 0, out.stderr
    lines = [json.loads(x) for x in labels.read_text().splitlines()]
    assert [(x["id"], x["score"], x["verdict"], x["judgeVerdict"]) for x in lines] == [
        ("rev:1", 2.0, "fail", "pass"), ("rev:2", 5.0, "pass", "fail")]
    assert lines[0]["criteria"] == REVIEW["criteria"] and lines[0]["dimensions"][0]["name"] == "correctness"
    assert lines[0]["judgeModels"] == ["openai/fake-a", "openai/fake-b", "openai/fake-c"]
    assert (labels.parent / lines[0]["workspace"]).resolve() == (state / "workspaces" / "rev").resolve()

    scored = run_cli("calibrate", "--labels", str(labels), "--json", "--config", str(config), env={KEY_ENV: "sk-override"})
    assert scored.returncode == 0, scored.stderr
    report = json.loads(scored.stdout)
    assert report["scored"] == 2 and [r["human"] for r in report["results"]] == [2.0, 5.0]
