"""Polpo's five templates, as a user runs them: ``polpo submit TEMPLATE --param …`` to a daemon that has only its
config file (team agents and the judge get model, endpoint and key from ``[defaults]`` / ``[judge]``, the key from
``[llm] env_file``), every mission to its end.

The model is tests/support/fake_llm.py over real HTTP: an agent's turn is answered with ``write_file`` calls for
the files its checks name (``file_exists``), or that its description names as a ``path``, plus the ``calc.py``
its test command imports, and a ``register_outcome`` call for each expected outcome its prompt lists; then a
short final answer. Judge requests (reviewers, dimensions) are answered by
tests/support/judges.py with a passing score.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import daemon_process, read_events, run_cli, wait_events, write_config
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, text, tool_call, tool_calls
from tests.support.judges import ScriptedJudge

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "templates"
KEY = "sk-template-test-5e6f7a8b"
CALC = "def add(a, b):\n    return a + b\n"
TEST_COMMAND = "python3 -c 'import calc; assert calc.add(2, 3) == 5'"
PARAMS: dict[str, list[str]] = {
    "bug-fix": ["issue=add() returns the wrong sum", f"test_command={TEST_COMMAND}", "scope=calc.py"],
    "code-review": ["module=calc", f"test_command={TEST_COMMAND}", "focus=readability"],
    "refactoring": ["module=calc", "goal=reduce complexity", f"test_command={TEST_COMMAND}"],
    "preventivo-pdf": ["cliente=ACME", "email_cliente=acme@example.com", "descrizione_lavoro=Sito web",
                       "importo=1200", "telegram_channel=audit"],
    "site-audit": ["url=https://example.com", "telegram_channel=audit", "depth=3"],
}


def agent_reply(req: RecordedRequest) -> Reply:
    """One agent turn: write the files the task's checks expect, then (once the tools answered) say done."""
    if req["messages"][-1]["role"] == "tool":
        return text("Done: the files are written.")
    task = next(m["content"] for m in req["messages"] if m["role"] == "user")
    names: list[str] = []
    for line in re.findall(r"^- file_exists: (.+)$", task, flags=re.M):
        names += [n.strip() for n in line.split(",")]
    if not names:
        names = re.findall(r'path: "([^"]+)"', task)
    calls = [("write_file", {"path": n, "content": f"# {n}\n\nWritten for the task; see calc.py:1.\n"})
             for n in names]
    if "import calc" in task:
        calls.append(("write_file", {"path": "calc.py", "content": CALC}))
    # the outcomes the prompt asks for ("- 'Preventivo PDF' (file): …"): a file written and declared, or a text
    for label, kind in re.findall(r"^- '([^']+)' \((file|text|url|json)\b", task, flags=re.M):
        if kind == "file":
            path = re.sub(r"\W+", "-", label.lower()).strip("-") + ".txt"
            calls.append(("write_file", {"path": path, "content": f"{label}\n"}))
            calls.append(("register_outcome", {"type": "file", "label": label, "path": path}))
        else:
            calls.append(("register_outcome", {"type": kind, "label": label, "value": f"{label}: done"}))
    if not calls:
        return text("Reviewed: the earlier work does what the task asks (calc.py:1).")
    return tool_calls(calls) if len(calls) > 1 else tool_call(*calls[0])


@pytest.fixture
def srv() -> Iterator[FakeLLM]:
    judge = ScriptedJudge(score=4.5)
    with FakeLLM(models=["fake-model"]) as server:
        server.responder = lambda req: agent_reply(req) if any(
            t["function"]["name"] == "write_file" for t in req.get("tools") or []) else judge(req)
        yield server


def test_the_five_polpo_templates_run_to_the_end_with_a_config_file_only(tmp_path: Path, srv: FakeLLM) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "keys.env").write_text(f"POLPO_TEMPLATE_KEY={KEY}\n")
    endpoint = f'model = "openai/fake-model"\napi_base = "{srv.base_url}"\napi_key_env = "POLPO_TEMPLATE_KEY"\n'
    config = write_config(tmp_path, agents="", extra=f"""
[llm]
env_file = "keys.env"
max_retries = 0

[judge]
{endpoint}
[channels.audit]
type = "file"
path = "audit.jsonl"
""")
    text_ = config.read_text().replace("[defaults]\n", "[defaults]\n" + endpoint, 1)
    config.write_text(text_)
    state = tmp_path / "state"
    with daemon_process(config):  # the key is in no environment: it comes from the env file
        wait_events(state, lambda evs: any(e["event"] == "orchestrator:started" for e in evs))
        for name, params in PARAMS.items():
            args = [a for p in params for a in ("--param", p)]
            r = run_cli("submit", "--config", str(config), str(EXAMPLES / f"{name}.workflow.json"), *args)
            assert r.returncode == 0, r.stdout + r.stderr
        evs = wait_events(state, lambda evs: sum(e["event"] == "mission:completed" for e in evs) == len(PARAMS),
                          timeout=240)
        audit = tmp_path / "config" / "audit.jsonl"
        wait_events(state, lambda _: audit.exists() and len(audit.read_text().splitlines()) >= 2)

    done = {e["missionId"]: e["data"] for e in evs if e["event"] == "mission:completed"}
    assert {mid: d["outcome"] for mid, d in done.items()} == {name: "completed" for name in PARAMS}, [
        (e["event"], e.get("taskId"), e["data"].get("reason") or e["data"].get("message")) for e in read_events(state)
        if e["event"] in ("task:transition", "assessment:complete") and e["data"].get("to") != "assigned"]
    ws = state / "workspaces"
    assert (ws / "bug-fix" / "diagnosis.md").exists() and (ws / "bug-fix" / "calc.py").read_text() == CALC
    assert (ws / "code-review" / "analysis-report.md").exists()
    assert (ws / "refactoring" / "refactor-plan.md").exists()
    assert (ws / "preventivo-pdf" / "preventivo-ACME.pdf").exists()
    assert (ws / "site-audit" / "audit-data.json").exists() and (ws / "site-audit" / "audit-report.md").exists()
    # every check ran: files, the filled test command, the declared outcome, the reviews (judged on the files
    # the agents wrote)
    checks = [e["data"] for e in read_events(state) if e["event"] == "assessment:check:complete"]
    assert {c["type"] for c in checks} == {"file_exists", "test", "expected_outcomes", "llm_review"}
    assert all(c["passed"] for c in checks)
    assert sum(c["type"] == "llm_review" for c in checks) == 9  # 2 + 2 + 1 + 2 + 2 in the five templates
    gate = [e for e in evs if e["event"] == "quality:gate:passed"]
    assert [g["missionId"] for g in gate] == ["code-review"]
    # the team agents reached the scripted server with the key from the env file, as did the judges
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in srv.requests)
    assert srv.unscripted == 0
    notes = [json.loads(x) for x in audit.read_text().splitlines()]
    assert sorted((n["missionId"], n["summary"]) for n in notes) == [
        ("preventivo-pdf", "Workflow preventivo per ACME completato"),
        ("site-audit", "Audit completato per https://example.com")]
    # enableGit asks for worktrees; these default workspaces are no repositories, so the mission says so
    accepted: dict[str, Any] = {e["missionId"]: e["data"] for e in evs if e["event"] == "mission:accepted"}
    assert any('isolation "worktree"' in w for w in accepted["bug-fix"]["warnings"])
    assert not any("isolation" in w for w in accepted["site-audit"]["warnings"])
