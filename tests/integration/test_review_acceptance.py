"""Acceptance: an llm_review through a real in-process daemon, three judge models over real HTTP (FakeLLM).

One mission runs once for the whole module (``accepted``): a shell task writes ``out.txt`` and is reviewed by
``openai/fake-a``, ``fake-b`` and ``fake-c`` on one dimension (``quality``, threshold 4.2). They score 2, 4 and 5:
the median is 4, the 2 is more than 1.5 away and dropped, the final score is the median of [4, 5] = 4.5 ≥ 4.2.
On the way, in phase 1, reviewer ``fake-a`` tries ``read_file("../secret.txt")``: the daemon's workspace is
``<state>/workspaces/<mission id>`` and the test put a secret file right next to it, in ``<state>/workspaces``.
The tests then read what the run left behind: events, ``polpo show TASK --json`` (a CLI subprocess), the
requests FakeLLM received and every file in the state folder; the judge's API key must be in none of them.

A second run (``provoked``) tries harder to leak the key: ``fake-c`` quotes it back in its analysis and
reasoning, and the task prints it (command agents inherit the daemon's environment).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from polpo.config import Config, load_config
from polpo.events.catalog import Event
from polpo.review import score_prompts
from tests.support.daemon import mission_json, run_cli, running_daemon, shell_task, submit, write_config
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, text, tool_call
from tests.support.judges import phase, requested_dimensions

KEY_ENV = "POLPO_ACCEPT_JUDGE_KEY"
KEY = "sk-accept-judge-5e4d3c2b1a09f8e7"
SECRET = "SECRET-NEXT-DOOR-c0ffee-42"
MODELS = ("fake-a", "fake-b", "fake-c")
SCORES = {"fake-a": 2.0, "fake-b": 4.0, "fake-c": 5.0}
MISSION = "accept"
TASK = f"{MISSION}:1"
ANALYSIS = "quality: out.txt greets the user (out.txt:1)."
EXPECTATION = {"type": "llm_review", "criteria": "out.txt greets the user politely", "threshold": 4.2,
               "dimensions": [{"name": "quality", "weight": 1, "description": "A polite, clear greeting"}]}


def responder(*, quote_key: bool) -> Callable[[RecordedRequest], Reply]:
    """Every reviewer reads one file first (fake-a: the secret next door), then analyses, then scores.

    ``quote_key``: fake-c repeats the API key in its analysis and its reasoning.
    """
    def respond(req: RecordedRequest) -> Reply:
        model = req["model"]
        kind = phase(req)
        leak = f" The request had Authorization: Bearer {KEY}, key {KEY}." if quote_key and model == "fake-c" else ""
        if kind == "explore":
            if not any(m["role"] == "tool" for m in req["messages"]):
                return tool_call("read_file", {"path": "../secret.txt" if model == "fake-a" else "out.txt"})
            return text(f"{ANALYSIS} Reviewer {model}.{leak}")
        if kind in ("json", "forced", "auto"):
            score = SCORES[model]
            answer = {
                "scores": [{"dimension": n, "score": score, "reasoning": f"{model} gives {score:g}: see out.txt{leak}",
                            "evidence": [{"file": "out.txt", "line": 1, "note": "the greeting"}]}
                           for n in requested_dimensions(req)],
                "summary": f"{model} summary"}
            return text(json.dumps(answer)) if kind == "json" else tool_call(score_prompts.SUBMIT_REVIEW, answer)
        raise AssertionError(f"unexpected {kind} request from {model}")
    return respond


@dataclass
class Run:
    cfg: Config
    secret: Path
    events: list[Event]
    requests: list[RecordedRequest]
    server_errors: list[str]
    show: dict[str, Any]
    show_text: str
    state_files: dict[Path, bytes] = field(default_factory=dict)

    def of(self, name: str) -> list[Event]:
        return [e for e in self.events if e.event == name]

    def requests_of(self, model: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r["model"] == model]


async def _run_mission(cfg: Config, script: str) -> list[Event]:
    task = shell_task("greet", script, expectations=[EXPECTATION])
    async with running_daemon(cfg) as (_, w):
        submit(cfg, f"{MISSION}.json", mission_json(task))
        await w.wait_event("mission:completed", timeout=60)
    return list(w.events)


def _scenario(root: Path, *, provoke: bool) -> Iterator[Run]:
    with pytest.MonkeyPatch.context() as mp, FakeLLM(models=MODELS) as srv:
        mp.setenv(KEY_ENV, KEY)
        cfg = load_config(write_config(root, extra=f"""
[judge]
models = ["openai/fake-a", "openai/fake-b", "openai/fake-c"]
api_base = "{srv.base_url}"
api_key_env = "{KEY_ENV}"

[llm]
max_retries = 0
"""))
        secret = cfg.state_dir / "workspaces" / "secret.txt"
        secret.parent.mkdir(parents=True)
        secret.write_text(SECRET + "\n")
        srv.responder = responder(quote_key=provoke)
        script = 'echo "hello there" > out.txt'
        if provoke:
            script += f'; echo "judge key: [${{{KEY_ENV}:-unset}}]"'
        events = anyio.run(_run_mission, cfg, script, backend="asyncio")
        shown = run_cli("show", TASK, "--json", "--config", str(cfg.source))
        assert shown.returncode == 0, shown.stderr
        shown_text = run_cli("show", TASK, "--config", str(cfg.source))
        assert shown_text.returncode == 0, shown_text.stderr
        files = {p: p.read_bytes() for p in cfg.state_dir.rglob("*") if p.is_file() and p != secret}
        yield Run(cfg=cfg, secret=secret, events=events, requests=srv.requests, server_errors=list(srv.errors),
                  show=json.loads(shown.stdout), show_text=shown_text.stdout, state_files=files)


@pytest.fixture(scope="module")
def accepted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    yield from _scenario(tmp_path_factory.mktemp("acceptance"), provoke=False)


@pytest.fixture(scope="module")
def provoked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    yield from _scenario(tmp_path_factory.mktemp("provoked"), provoke=True)


def query(run: Run, sql: str) -> list[sqlite3.Row]:
    with closing(sqlite3.connect(run.cfg.db_path)) as con:
        con.row_factory = sqlite3.Row
        return con.execute(sql).fetchall()


def the_review_check(run: Run) -> dict[str, Any]:
    (assessment,) = run.show["attempts"][0]["assessments"]
    (check,) = [c for c in assessment["checks"] if c["type"] == "llm_review"]
    return dict(check)


# ------------------------------------------------------------------------------------------------ (a) the verdict


def test_2_4_5_passes_a_4_2_threshold_with_4_5(accepted: Run) -> None:
    assert accepted.server_errors == []
    assert accepted.of("mission:completed")[-1].data["outcome"] == "completed"
    (complete,) = accepted.of("assessment:complete")
    assert complete.task_id == TASK
    assert complete.data["passed"] is True
    assert complete.data["globalScore"] == 4.5  # not rounded to 5, not dragged to 3.67 by the 2
    assert [(s["dimension"], s["score"]) for s in complete.data["scores"]] == [("quality", 4.5)]
    assert accepted.show["status"] == "done"
    assert accepted.show["score"] == 4.5
    check = the_review_check(accepted)
    assert check["passed"] and check["message"].startswith("Score 4.50/5 (threshold 4.2)")
    assert "quality: 4.5/5 (weight: 1; votes: 2 (outlier), 4, 5)" in check["details"]
    # every reviewer ran, each on its own model
    assert sorted(r["model"] for r in accepted.requests) == sorted(f"fake-{x}" for x in "abc" for _ in range(3))


def test_show_json_has_every_reviewers_trace(accepted: Run) -> None:
    (assessment,) = accepted.show["attempts"][0]["assessments"]
    reviews = assessment["reviews"]
    assert [(r["index"], r["model"], r["ok"]) for r in reviews] == [
        (0, "openai/fake-a", True), (1, "openai/fake-b", True), (2, "openai/fake-c", True)]
    for r, model in zip(reviews, MODELS, strict=True):
        score = SCORES[model]
        assert r["strategy"] == "json_text" and r["globalScore"] == score
        assert [(s["dimension"], s["score"]) for s in r["scores"]] == [("quality", score)]
        assert r["scores"][0]["reasoning"] == f"{model} gives {score:g}: see out.txt"
        assert r["scores"][0]["evidence"] == [{"file": "out.txt", "line": 1, "note": "the greeting"}]
        assert r["analysis"].startswith(f"{ANALYSIS} Reviewer {model}.")
        roles = [(m["phase"], m["role"]) for m in r["messages"]]
        assert roles == [(1, "system"), (1, "user"), (1, "assistant"), (1, "tool"), (1, "assistant"),
                         (2, "system"), (2, "user"), (2, "assistant")]
        assert r["messages"][2]["toolCalls"][0]["name"] == "read_file"
    assert [r["filesRead"] for r in reviews] == [[], ["out.txt"], ["out.txt"]]
    assert "reviewer 0 (openai/fake-a): score 2.00 via json_text" in accepted.show_text, accepted.show_text


def test_the_reasoning_shown_comes_from_a_kept_reviewer_never_the_dropped_2(accepted: Run) -> None:
    """4.5 is 0.5 from both kept votes: the lower score (fake-b's 4) is credited, since it names the problems."""
    (quality,) = the_review_check(accepted)["scores"]["scores"]  # the checks.scores column
    assert quality["reasoning"] == "fake-b gives 4: see out.txt"
    (complete,) = accepted.of("assessment:complete")
    assert complete.data["scores"][0]["reasoning"] == "fake-b gives 4: see out.txt"
    assert "fake-a gives 2" not in json.dumps(complete.data)


def test_the_checks_scores_mark_the_2_as_not_kept(accepted: Run) -> None:
    stored = the_review_check(accepted)["scores"]  # the checks.scores column: {globalScore, scores}
    assert stored["globalScore"] == 4.5
    (quality,) = stored["scores"]
    assert (quality["dimension"], quality["score"]) == ("quality", 4.5)
    assert quality["reviewerScores"] == [{"reviewer": 0, "score": 2.0, "kept": False,
                                          "why": "2 from the median 4 (more than 1.5)"},
                                         {"reviewer": 1, "score": 4.0, "kept": True},
                                         {"reviewer": 2, "score": 5.0, "kept": True}]


# ------------------------------------------------------------------------------------------------ (b) the sandbox


def test_a_read_outside_the_workspace_is_an_error_and_the_secret_goes_nowhere(accepted: Run) -> None:
    workspace = accepted.cfg.state_dir / "workspaces" / MISSION
    assert (workspace / "out.txt").is_file()
    assert (workspace / ".." / "secret.txt").resolve() == accepted.secret.resolve()  # the path really exists
    second = accepted.requests_of("fake-a")[1]  # phase 1, turn 2: carries the tool result
    (result,) = [m for m in second["messages"] if m["role"] == "tool"]
    assert "refused" in result["content"] and "'..' is not allowed" in result["content"]
    (traced,) = [m for m in accepted.show["attempts"][0]["assessments"][0]["reviews"][0]["messages"]
                 if m["role"] == "tool"]
    assert traced["isError"] is True and traced["toolName"] == "read_file"
    for req in accepted.requests:
        assert SECRET not in json.dumps(req.body)
    for path, data in accepted.state_files.items():
        assert SECRET.encode() not in data, path
    assert accepted.secret.read_text() == SECRET + "\n"  # the one place it is: where the test put it


# ------------------------------------------------------------------------------------------------ (c) the key


def test_the_api_key_is_sent_but_stored_nowhere(accepted: Run) -> None:
    assert {r.headers["authorization"] for r in accepted.requests} == {f"Bearer {KEY}"}
    assert any(p.name == "events.jsonl" for p in accepted.state_files)
    assert any(p.name == accepted.cfg.db_path.name for p in accepted.state_files)
    for path, data in accepted.state_files.items():
        assert KEY.encode() not in data, path
    assert KEY not in json.dumps(accepted.show) and KEY not in accepted.show_text


def test_a_key_quoted_by_a_reviewer_is_masked_everywhere_it_is_stored(provoked: Run) -> None:
    assert provoked.of("assessment:complete")[0].data["passed"] is True
    for (data,) in query(provoked, "SELECT data FROM reviews"):
        assert KEY not in data
    for row in query(provoked, "SELECT message, details, scores FROM checks"):
        assert KEY not in json.dumps(dict(row))
    events = (provoked.cfg.state_dir / "events.jsonl").read_text()
    assert KEY not in events
    fake_c = provoked.show["attempts"][0]["assessments"][0]["reviews"][2]
    assert "Bearer ***" in fake_c["analysis"]  # masked, not dropped


def test_a_key_printed_by_the_agent_is_masked_in_the_stored_output(provoked: Run) -> None:
    ((tail,),) = query(provoked, "SELECT stdout_tail FROM attempts")
    assert tail.startswith("judge key: [")  # the agent did see it and print it
    assert KEY not in tail
