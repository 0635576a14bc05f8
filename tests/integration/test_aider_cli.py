"""The real ``aider`` CLI as a polpo command agent, configured as the README says, against the scripted model.

The polpo folder (config, missions, state and so the workspaces) sits inside a git repository made by the test,
as in the quick start, where the state lives inside the clone. aider (``.venv-aider``, see
tests/support/aider.py) talks to tests/support/fake_llm.py over real HTTP; the scripted model answers in aider's
whole-file format. Its HOME is a temp folder (aider keeps ``~/.aider`` there).

The dead-endpoint test waits out aider's own ~85 s of retries, so it runs only with ``POLPO_LONG_TESTS=1``;
the other tests take a few seconds each (mostly aider starting).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polpo.config import Config
from polpo.missions_lock import LOCK_NAME
from tests.support.aider import (
    AIDER_COMMAND,
    AIDER_ENV,
    agent_toml,
    aider_command,
    message_of,
    model_metadata,
    require_aider,
    whole_file,
)
from tests.support.daemon import load, mission_json, run_cli, running_daemon, submit, write_config
from tests.support.doc_examples import blocks
from tests.support.fake_llm import FakeLLM, RecordedRequest, error, text
from tests.support.long import long_test

pytestmark = pytest.mark.anyio

MODEL = "openai/fake-model"
ADD = "def add(a, b):\n    return a + b\n"
MUL_BUGGY = ADD + "\n\ndef mul(a, b):\n    return a + b\n"
MUL_FIXED = ADD + "\n\ndef mul(a, b):\n    return a * b\n"
MUL_TEST = ("python3 -c \"from calc import add, mul; assert add(2, 3) == 5; "
            "assert mul(2, 3) == 6, 'mul(2, 3) returned %r' % mul(2, 3)\"")


def test_the_docs_recipe_is_the_one_tests_run() -> None:
    """The docs' ``[agents.aider]`` is :data:`AIDER_COMMAND` / :data:`AIDER_ENV`, so these tests prove the docs."""
    agents = [tomllib.loads(b.body).get("agents", {}) for b in blocks("toml")]
    aider = next(a["aider"] for a in agents if "aider" in a)
    assert aider["command"] == list(AIDER_COMMAND)
    assert aider["env"] == dict(AIDER_ENV)


# ------------------------------------------------------------------------------------------------ set-up


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def enclosing_repo(tmp_path: Path) -> Path:
    """A git repository with one commit; the polpo folder (config, missions, state) goes inside it."""
    repo = tmp_path / "clone"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / ".gitignore").write_text("/state/\n")
    (repo / "README.md").write_text("the enclosing repository\n")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "-qm", "init")
    return repo


@pytest.fixture
def aider_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    model_metadata(home, MODEL)
    return home


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM(models=["fake-model"]) as srv:
        yield srv


def _config(repo: Path, home: Path, base_url: str, **env_overrides: str) -> Config:
    """The README's aider agent pointed at ``base_url`` with a dummy key, its HOME in ``home``."""
    require_aider()
    env = {**AIDER_ENV, "HOME": str(home), "OPENAI_API_BASE": base_url, "OPENAI_API_KEY": "sk-test",
           **env_overrides}
    path = write_config(repo, agents=agent_toml("aider", aider_command(MODEL), env, timeout=300))
    return load(path)


def _show(cfg: Config, task_id: str) -> dict[str, Any]:
    """What polpo stored for a task: ``polpo show TASK --json``."""
    assert cfg.source is not None
    out = run_cli("show", task_id, "--json", "--config", str(cfg.source))
    assert out.returncode == 0, out.stderr
    shown: dict[str, Any] = json.loads(out.stdout)
    return shown


def _files_outside(root: Path, inside: Path) -> list[str]:
    """Files under ``root``, except those under ``inside`` and in ``.git``."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git" and Path(dirpath, d) != inside]
        found += [os.path.relpath(Path(dirpath, f), root) for f in filenames]
    return sorted(found)


def _unwrapped(text: str) -> str:
    """aider's console wraps lines at 80 columns even with ``--no-pretty``: compare with whitespace collapsed."""
    return " ".join(text.split())


def _git_state(repo: Path) -> tuple[str, str, str]:
    """The index, the committed .gitignore's current text and the repository config, to compare before/after."""
    return _git(repo, "ls-files", "--stage"), (repo / ".gitignore").read_text(), (repo / ".git" / "config").read_text()


# ------------------------------------------------------------------------------------------------ tests


@pytest.mark.timeout(300)
async def test_aider_writes_a_file_then_fixes_a_failing_test_inside_the_workspace_only(
        enclosing_repo: Path, aider_home: Path, fake_llm: FakeLLM) -> None:
    def reply(req: RecordedRequest) -> str | None:
        msg = message_of(req)
        if "# Write calc.py" in msg:
            return whole_file("calc.py", ADD)
        if "# Add mul" in msg:
            return whole_file("calc.py", MUL_FIXED if msg.startswith("TARGETED FIX") else MUL_BUGGY)
        return None  # anything else is a bug in the test: FakeLLM answers 500 and counts it

    fake_llm.responder = reply
    cfg = _config(enclosing_repo, aider_home, fake_llm.base_url)
    before = _git_state(enclosing_repo)
    tasks = [
        {"title": "Write calc.py", "description": "Create calc.py with add(a, b) returning a + b.",
         "assignTo": "aider", "maxRetries": 0, "maxFixAttempts": 0,
         "expectations": [{"type": "file_exists", "path": "calc.py"}]},
        {"title": "Add mul", "description": "Add mul(a, b) to calc.py, returning a * b; keep add.",
         "assignTo": "aider", "dependsOn": ["Write calc.py"], "maxRetries": 0, "maxFixAttempts": 1,
         "expectations": [{"type": "test", "command": MUL_TEST}]},
    ]
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "calc.json", mission_json(*tasks, name="calc"))
        done = await w.wait_event("mission:completed", timeout=240)

    assert done.data["outcome"] == "completed", [e.event for e in w.events]
    ws = cfg.state_dir / "workspaces" / "calc"
    assert ws.is_relative_to(enclosing_repo)
    assert (ws / "calc.py").read_text() == MUL_FIXED
    assert not [p.name for p in ws.iterdir() if p.name.startswith(".aider")]
    # nothing landed elsewhere in the enclosing repository (the daemon's own lock on its missions folder aside, which
    # refuses a second daemon there); its index, .gitignore and config are untouched
    assert _files_outside(enclosing_repo, cfg.state_dir) == [
        ".gitignore", "README.md", "config/polpo.toml", f"missions/{LOCK_NAME}", "missions/calc.json"]
    assert _git_state(enclosing_repo) == before

    # the second task failed its test once, got a targeted fix, and aider was sent the check's feedback
    assert len(w.of("task:fix", task_id="calc:2")) == 1
    assert fake_llm.unscripted == 0 and not fake_llm.errors
    messages = [message_of(r) for r in fake_llm.requests]
    assert len(messages) == 3
    fix = messages[2]
    assert fix.startswith("TARGETED FIX") and "Failed checks:" in fix
    assert "mul(2, 3) returned 5" in fix  # the failing assertion, from the test's stderr
    # aider's own files are not in the attributed changes
    write, add = _show(cfg, "calc:1"), _show(cfg, "calc:2")
    assert [a["files"]["created"] for a in write["attempts"]] == [["calc.py"]]
    assert [(a["kind"], a["files"]) for a in add["attempts"]] == [
        ("initial", {"created": [], "modified": ["calc.py"], "deleted": [], "attributed": True, "tracking": "watch"}),
        ("fix", {"created": [], "modified": ["calc.py"], "deleted": [], "attributed": True, "tracking": "watch"}),
    ]


@pytest.mark.timeout(300)
async def test_an_authentication_error_exits_0_its_stdout_is_shown_and_fed_back(
        enclosing_repo: Path, aider_home: Path, fake_llm: FakeLLM, tmp_path: Path) -> None:
    """aider cannot be made to exit non-zero when its model fails: polpo sees exit 0, no files, and the reason only
    on stdout; the task fails through its check, ``polpo show`` prints that stdout and the fix attempt is told it.
    aider also "opens" the URL in the error, which is why the recipe sets ``BROWSER=true``; here a recording script
    stands in for it."""
    fake_llm.script(error(401, {"error": {
        "message": "Incorrect API key provided. You can find your API key at https://platform.example/api-keys.",
        "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}}),
        text(whole_file("calc.py", ADD)))
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "record-url"
    browser.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" >> {opened}\n')
    browser.chmod(0o755)
    cfg = _config(enclosing_repo, aider_home, fake_llm.base_url, BROWSER=str(browser))
    task = {"title": "Write calc.py", "description": "Create calc.py.", "assignTo": "aider",
            "maxRetries": 0, "maxFixAttempts": 1, "expectations": [{"type": "file_exists", "path": "calc.py"}]}
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "auth.json", mission_json(task, name="auth"))
        done = await w.wait_event("mission:completed", timeout=240)

    assert done.data["outcome"] == "completed"  # the fix attempt, told why, wrote the file
    assert len(fake_llm.requests) == 2  # aider itself did not retry the 401
    fix = _unwrapped(message_of(fake_llm.requests[1]))
    assert "The agent exited 0 but changed no file; its output ended with:" in fix
    assert "litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key provided." in fix
    assert cfg.source is not None
    shown = run_cli("show", "auth:1", "--config", str(cfg.source)).stdout
    assert "stdout: " in shown and "litellm.AuthenticationError" in _unwrapped(shown)
    attempt, _ = _show(cfg, "auth:1")["attempts"]
    assert attempt["exit_code"] == 0
    assert attempt["files"] == {"created": [], "modified": [], "deleted": [], "attributed": True, "tracking": "watch"}
    out = _unwrapped(attempt["stdout_tail"])
    assert "litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key provided." in out
    assert out.endswith("The API provider is not able to authenticate you. Check your API key. "
                        "https://platform.example/api-keys")
    assert attempt["stderr_tail"] == ""
    assert opened.read_text() == "https://platform.example/api-keys\n"


@long_test("aider retries a refused connection for about 85 s, its own backoff")
@pytest.mark.timeout(400)
async def test_a_dead_model_endpoint_exits_0_after_retrying_and_is_only_on_stdout(
        enclosing_repo: Path, aider_home: Path) -> None:
    """Connection refused: aider retries for about 85 s (its own backoff, not configurable), then exits 0."""
    with socket.socket() as holder:  # bound, never listening: connections are refused, and no one else gets it
        holder.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{holder.getsockname()[1]}/v1"
        cfg = _config(enclosing_repo, aider_home, dead)
        task = {"title": "Write calc.py", "description": "Create calc.py.", "assignTo": "aider",
                "maxRetries": 0, "maxFixAttempts": 0,
                "expectations": [{"type": "file_exists", "path": "calc.py"}]}
        async with running_daemon(cfg) as (_, w):
            submit(cfg, "dead.json", mission_json(task, name="dead"))
            done = await w.wait_event("mission:completed", timeout=360)

    assert done.data["outcome"] == "failed"
    [attempt] = _show(cfg, "dead:1")["attempts"]
    assert attempt["exit_code"] == 0 and not attempt["timed_out"]
    assert attempt["files"] == {"created": [], "modified": [], "deleted": [], "attributed": True, "tracking": "watch"}
    out = _unwrapped(attempt["stdout_tail"])
    assert "litellm.InternalServerError: InternalServerError: OpenAIException - Connection error." in out
    assert "Retrying in 32.0 seconds..." in out
    assert out.endswith("Connection error. The API provider's servers are down or overloaded.")
    assert attempt["stderr_tail"] == ""
