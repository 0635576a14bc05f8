"""Field test (issue 23): polpo against a real small model, Qwen2.5-Coder-0.5B-Instruct, served on 127.0.0.1 by
llama.cpp's llama-server (scripts/field_model.py), with the daemon as a real process.

What a 0.5B model on two cores allows, and what these tests hold polpo to: the LLM agent writes a given file
through ``write_file`` and passes its ``file_content`` check, its tool loop getting past the second turn (the
turn that carries the assistant's tool call back to the server); a one-seat and a three-seat ``llm_review`` each
end with a verdict or an invalid-review error, never an outage backoff (``assessment:deferred``,
``agent:interrupted``), and ``polpo show`` says which; every task ends (done, failed or on hold with a reason)
within a bound; the daemon stays up; and no request the server saw exceeded its context window (its own log).
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.field.conftest import FieldModel
from tests.support.daemon import daemon_process, mission_json, read_events, run_cli, shell_task, wait_events

pytestmark = [pytest.mark.field, pytest.mark.timeout(1200)]

BOUND = 900  # seconds a task may take before the harness gives up on it (calls are serialised on two cores)
ENDED = ("done", "failed", "on_hold")
GREETING = "Hello from polpo"
ADD = "def add(a, b):\n    return a + b\n"


DOCS = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "local-models.md"
DOC_BASE, DOC_MODEL = "http://127.0.0.1:8080/v1", "openai/qwen2.5-coder-0.5b-instruct"
TEST_ONLY = """
[daemon]
missions_dir = "../missions"
state_dir = "../state"
shutdown_grace = 5

[defaults]
max_retries = 0          # one attempt: the outcome is the model's, not a retry's
max_fix_attempts = 0
agent_timeout = 900
check_timeout = 60

[agents.shell]
type = "command"
command = ["bash", "-c", "{description}"]
timeout = 30
"""


def documented_config() -> str:
    """The config of docs/how-to/local-models.md ("The config"): the field suite runs exactly what the docs say."""
    page = DOCS.read_text()
    body = page.split("## The config", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    assert DOC_BASE in body and DOC_MODEL in body, "the docs' config no longer names the server it is tested on"
    return body


def write_config(root: Path, field: FieldModel, *, seats: int) -> Path:
    """The documented config on the local server, with what a test needs (a state folder, a shell agent, one
    attempt per task) and ``seats`` reviewers; an outage holds the task at once (and fails the test)."""
    (root / "config").mkdir(parents=True)
    (root / "missions").mkdir()
    path = root / "config" / "polpo.toml"
    doc = documented_config().replace(DOC_BASE, field.api_base).replace(DOC_MODEL, field.model)
    doc = re.sub(r"(?m)^seats = 1 .*$", f"seats = {seats}", doc)
    doc = doc.replace("[judge]\n", "[judge]\noutage_retries = 0       # an outage fails the test instead of backing off\n")
    path.write_text(TEST_ONLY + doc)
    assert f"seats = {seats}" in path.read_text()
    return path


def task_end(events: list[dict[str, Any]], task_id: str) -> dict[str, Any] | None:
    return next((e for e in events if e["event"] == "task:transition" and e.get("taskId") == task_id
                 and e["data"]["to"] in ENDED), None)


def run_mission(tmp_path: Path, field: FieldModel, seats: int, name: str, task: dict[str, Any],
                ) -> tuple[Path, list[dict[str, Any]], dict[str, Any], str]:
    """Submit one one-task mission to a real daemon process; wait (bounded) until the task ends. Returns the
    config, the events, ``polpo show TASK --json`` and ``polpo show TASK``'s text."""
    config = write_config(tmp_path, field, seats=seats)
    (tmp_path / "missions" / f"{name}.json").write_text(mission_json(task, name=name))
    state = tmp_path / "state"
    with daemon_process(config) as proc:
        events = wait_events(state, lambda evs: task_end(evs, f"{name}:1") is not None, timeout=BOUND)
        assert proc.poll() is None, "the daemon ended"  # it stays up through whatever the model did
        shown = json.loads(run_cli("show", f"{name}:1", "--json", "--config", str(config)).stdout)
        text = run_cli("show", f"{name}:1", "--config", str(config)).stdout
        assert proc.poll() is None, "the daemon ended"
    return config, read_events(state) or events, shown, text


def assert_no_outage(events: list[dict[str, Any]]) -> None:
    """Nothing the model did was taken for its server being down."""
    assert not [e for e in events if e["event"] in ("assessment:deferred", "agent:interrupted")], \
        [e["data"] for e in events if e["event"] in ("assessment:deferred", "agent:interrupted")]
    for e in events:
        if e["event"] == "assessment:error":
            assert e["data"]["retryable"] is False, e["data"]


def assert_within_context(field: FieldModel) -> None:
    """The server's own log: no request was refused for its size (llama-server: "request (N tokens) exceeds the
    available context size"; llama-cpp-python: "Requested tokens (N) exceed context window"), and with
    llama-server every request's slot (prompt and reply) stayed inside the window, untruncated."""
    log = field.log.read_text(errors="replace")
    assert "exceed" not in log.lower(), [ln for ln in log.splitlines() if "exceed" in ln.lower()][:5]
    if field.server == "llama-server":
        slots = [(int(n), int(t)) for n, t in re.findall(r"stop processing: n_tokens = +(\d+), truncated = (\d+)", log)]
        assert slots, "the server's log names no request's size: has its format changed?"
        assert max(n for n, _ in slots) < field.context and not any(t for _, t in slots), slots


def failed_traces(db: Path, task_id: str) -> list[tuple[str, int]]:
    """(assessment, reviewer) of the traces the store keeps for a review that ended in an error."""
    with contextlib.closing(sqlite3.connect(db)) as con:
        return con.execute("SELECT assessment_id, reviewer FROM reviews WHERE task_id = ? AND assessment_id LIKE "
                           "'%/error' ORDER BY assessment_id, reviewer", (task_id,)).fetchall()


def transcript(shown: dict[str, Any]) -> list[dict[str, Any]]:
    """Every entry of every attempt's transcript (``assistant``, ``tool`` and ``error`` entries)."""
    return [t for a in shown["attempts"] for t in a.get("transcript") or []]


def test_the_llm_agent_writes_the_file_through_write_file(tmp_path: Path, field_model: FieldModel) -> None:
    task = {"title": "Write hello.txt", "assignTo": "local",
            "description": f"Use the write_file tool once to create the file hello.txt whose whole content is: "
                           f"{GREETING}\nThen stop calling tools and reply with the one word: done",
            "expectations": [{"type": "file_content", "path": "hello.txt", "expected": GREETING}]}
    _, events, shown, text = run_mission(tmp_path, field_model, 1, "hello", task)
    assert_no_outage(events)
    assert (tmp_path / "state" / "workspaces" / "hello" / "hello.txt").read_text().strip() == GREETING
    checks = [e["data"] for e in events if e["event"] == "assessment:check:complete"]
    assert [(c["type"], c["passed"]) for c in checks] == [("file_content", True)], checks
    entries = transcript(shown)
    replies = [t for t in entries if t["type"] == "assistant"]
    assert replies and replies[0]["toolCalls"][0]["name"] == "write_file", entries
    # the tool loop's second turn (the assistant's tool call and its result sent back) was answered
    assert len(replies) >= 2, entries
    errors = [t for t in entries if t["type"] == "error"]
    end = task_end(events, "hello:1")
    assert end is not None
    # the 0.5B model writes the file again on every turn and never gives its final answer by itself: polpo nudges it
    # after the second identical turn and ends the conversation at the third (polpo.agents.repetition); the
    # file_content check then decides, and the task is done
    assert end["data"]["to"] == "done" and "status done" in text, (text, entries)
    assert [t["kind"] for t in errors] in ([], ["repeated"]), entries
    assert_within_context(field_model)


@pytest.mark.parametrize("seats", [1, 3])
def test_a_review_ends_with_a_verdict_or_an_invalid_review_never_an_outage(
        tmp_path: Path, field_model: FieldModel, seats: int) -> None:
    review = {"type": "llm_review", "threshold": 3.0,
              "criteria": "add.py defines add(a, b) that returns the sum of a and b, for example:\n"
                          ">>> add(2, 3)\n5",
              "dimensions": [{"name": "correctness", "weight": 1,
                              "description": "Does add(a, b) return a + b?"}]}
    test = {"type": "test", "command": "python3 -c 'from add import add; assert add(-1, 1) == 0'"}
    script = f"printf '{ADD.replace(chr(10), chr(92) + 'n')}' > add.py"
    _, events, shown, text = run_mission(tmp_path, field_model, seats, f"review{seats}",
                                         shell_task("write add.py", script, expectations=[test, review]))
    assert (tmp_path / "state" / "workspaces" / f"review{seats}" / "add.py").read_text() == ADD
    assert_no_outage(events)
    verdicts = [e for e in events if e["event"] == "assessment:complete"]
    errors = [e for e in events if e["event"] == "assessment:error"]
    assert len(verdicts) + len(errors) >= 1, [e["event"] for e in events]
    end = task_end(events, f"review{seats}:1")
    assert end is not None
    if errors:  # the model's output was not a review: the task waits on hold and show says why
        assert end["data"]["to"] == "on_hold" and "not tried again by itself" in text, text
    else:  # a verdict: done when it passed, failed when it did not (no fixes, no retries), with the score
        passed = verdicts[-1]["data"]["passed"]
        assert end["data"]["to"] == ("done" if passed else "failed")
        score = verdicts[-1]["data"]["globalScore"]
        assert score is not None and f"Score {score:.2f}/5" in text, text  # polpo show says which
        assert f"verdict: {'passed' if passed else 'failed'}" in text, text
    reviews = [r for a in shown["attempts"] for s in a["assessments"] for r in s.get("reviews") or []]
    if errors:  # a failed try's traces are kept apart from the verdicts' (ASSESSMENT/error), so the store is read
        reviews = failed_traces(tmp_path / "state" / "polpo.db", f"review{seats}:1")
    # one reviewer per seat; twice as many when no seat scored and the panel ran once more (it does, now and then)
    assert len(reviews) in (seats, 2 * seats), (reviews, [e["data"] for e in errors], text)
    # evidence first: the test check and the criteria's own example, run by polpo before the model looked
    panel = next(c["scores"]["review"] for a in shown["attempts"] for s in a["assessments"] for c in s["checks"]
                 if c["type"] == "llm_review" and c.get("scores"))
    items = panel["evidence"]["items"]
    assert [(i["kind"], i["passed"]) for i in items if i["kind"] in ("check", "example")] == [
        ("check", True), ("example", True)], items
    assert all(i["passed"] is not False for i in items), items  # the judge's own add agrees (probes), or is a note
    assert "evidence polpo ran: 1 of 1 stated examples passed; 1 of 1 checks passed" in text, text
    if not errors:  # llama-server returns token log-probabilities: the scores are their weighted means (G-Eval)
        assert panel["scoreSource"] in ("probability", "mixed"), panel
        assert "token probabilities" in text, text
        dist = [d["dist"] for d in panel["scores"] if d.get("dist")]
        assert dist and abs(sum(dist[0]["probs"].values()) - 1) < 1e-3, panel["scores"]
    assert_within_context(field_model)

