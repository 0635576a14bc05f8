"""CommandAgent with real programs: argv placeholders, POLPO_* environment, JSON on stdin, timeouts."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from polpo.agents.base import Agent, AgentRequest
from polpo.agents.command import CommandAgent, render_argv
from polpo.clock import SystemClock

PY = sys.executable
TRICKY_TITLE = """Say "hi" & it's $HOME; `rm -rf /` {nested} \\ end"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _request(workspace: Path, **changes: Any) -> AgentRequest:
    base = AgentRequest(
        task_id="task-1",
        mission_id="mission-9",
        mission_name="Build the thing",
        attempt_id="att-42",
        attempt_number=2,
        kind="fix",
        title="Write hello",
        description="Create hello.txt with a greeting",
        prompt="Create hello.txt.\n\nFeedback: the file was empty",
        feedback="the file was empty",
        workspace=workspace,
        timeout=60.0,
        expectations=[{"type": "file_exists", "paths": ["hello.txt"]}],
        env_marker=("POLPO_RUN_MARKER", "run-abc"),
    )
    return dataclasses.replace(base, **changes)


def _noop(pid: int) -> None:
    pass


def test_command_agent_satisfies_the_protocol() -> None:
    agent: Agent = CommandAgent("dev", ["true"], clock=SystemClock())
    assert agent.name == "dev"


def test_empty_command_is_rejected() -> None:
    with pytest.raises(ValueError):
        CommandAgent("dev", [], clock=SystemClock())


def test_render_argv_substitutes_known_placeholders_only(tmp_path: Path) -> None:
    req = _request(tmp_path, title=TRICKY_TITLE)
    argv = render_argv(
        ["prog", "{title}", "x{attempt}y-{task_id}", "{print $1}", "{unknown}", "{{title}}", "{ title }"], req
    )
    assert argv == [
        "prog",
        TRICKY_TITLE,
        "x2y-task-1",
        "{print $1}",
        "{unknown}",
        "{" + TRICKY_TITLE + "}",
        "{ title }",
    ]


@pytest.mark.anyio
async def test_placeholders_become_single_arguments_never_through_a_shell(tmp_path: Path) -> None:
    req = _request(tmp_path, title=TRICKY_TITLE, description="two words  and 'quotes'")
    script = "import sys, json; print(json.dumps(sys.argv[1:]))"
    agent = CommandAgent(
        "dev",
        [
            PY,
            "-c",
            script,
            "{title}",
            "{description}",
            "{prompt}",
            "{workspace}",
            "{task_id}",
            "{mission_id}",
            "{attempt}",
            "{print $1}",
            "{other}",
            "prefix-{task_id}",
        ],
        clock=SystemClock(),
    )
    res = await agent.run(req, on_start=_noop)
    assert res.exit_code == 0, res.stderr_tail
    assert json.loads(res.stdout_tail) == [
        TRICKY_TITLE,
        "two words  and 'quotes'",
        req.prompt,
        str(tmp_path),
        "task-1",
        "mission-9",
        "2",
        "{print $1}",
        "{other}",
        "prefix-task-1",
    ]


@pytest.mark.anyio
async def test_awk_braces_are_left_for_awk(tmp_path: Path) -> None:
    agent = CommandAgent("awk", ["bash", "-c", "echo one two three | awk '{print $2}'"], clock=SystemClock())
    res = await agent.run(_request(tmp_path), on_start=_noop)
    assert res.exit_code == 0
    assert res.stdout_tail == "two\n"


@pytest.mark.anyio
async def test_polpo_environment_and_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")
    script = "import os, json; print(json.dumps(dict(os.environ)))"
    req = _request(tmp_path)
    agent = CommandAgent("dev", [PY, "-c", script], clock=SystemClock(), env={"AGENT_SETTING": "on"})
    res = await agent.run(req, on_start=_noop)
    env = json.loads(res.stdout_tail)
    assert env["POLPO_TASK_ID"] == "task-1"
    assert env["POLPO_TASK_TITLE"] == "Write hello"
    assert env["POLPO_TASK_DESCRIPTION"] == "Create hello.txt with a greeting"
    assert env["POLPO_PROMPT"] == req.prompt
    assert env["POLPO_FEEDBACK"] == "the file was empty"
    assert env["POLPO_MISSION_ID"] == "mission-9"
    assert env["POLPO_MISSION_NAME"] == "Build the thing"
    assert env["POLPO_WORKSPACE"] == str(tmp_path)
    assert env["POLPO_ATTEMPT"] == "2"
    assert env["POLPO_ATTEMPT_KIND"] == "fix"
    assert env["POLPO_ATTEMPT_ID"] == "att-42"
    assert env["POLPO_RUN_MARKER"] == "run-abc"
    assert env["AGENT_SETTING"] == "on"
    # the default is the minimal environment: the daemon's keys stay in the daemon
    assert "OPENAI_API_KEY" not in env
    assert env["PATH"] == os.environ["PATH"]


@pytest.mark.anyio
async def test_inherit_env_passes_the_daemons_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")
    monkeypatch.setenv("SOME_DAEMON_SETTING", "x")
    script = "import os, json; print(json.dumps(dict(os.environ)))"
    agent = CommandAgent("dev", [PY, "-c", script], clock=SystemClock(), inherit_env=True,
                         env={"AGENT_SETTING": "on"})
    env = json.loads((await agent.run(_request(tmp_path), on_start=_noop)).stdout_tail)
    assert env["OPENAI_API_KEY"] == "sk-parent-secret"
    assert env["SOME_DAEMON_SETTING"] == "x"
    assert env["AGENT_SETTING"] == "on"
    assert env["POLPO_TASK_ID"] == "task-1"


@pytest.mark.anyio
async def test_passthrough_adds_only_the_named_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-for-the-cli")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    script = "import os, json; print(json.dumps(dict(os.environ)))"
    agent = CommandAgent("dev", [PY, "-c", script], clock=SystemClock(),
                         passthrough=["ANTHROPIC_API_KEY", "NOT_SET_ANYWHERE"])
    env = json.loads((await agent.run(_request(tmp_path, feedback=None, kind="initial"), on_start=_noop)).stdout_tail)
    assert env["ANTHROPIC_API_KEY"] == "sk-ant-for-the-cli"
    assert "OPENAI_API_KEY" not in env
    assert "NOT_SET_ANYWHERE" not in env  # a listed variable the daemon lacks is left out, not set empty
    assert env["POLPO_ATTEMPT_KIND"] == "initial"


@pytest.mark.anyio
async def test_minimal_env_when_not_inheriting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")
    script = "import os, json; print(json.dumps(dict(os.environ)))"
    agent = CommandAgent(
        "dev", [PY, "-c", script], clock=SystemClock(), inherit_env=False, env={"AGENT_SETTING": "on"}
    )
    res = await agent.run(_request(tmp_path, feedback=None, kind="initial"), on_start=_noop)
    env = json.loads(res.stdout_tail)
    assert "OPENAI_API_KEY" not in env
    assert env["AGENT_SETTING"] == "on"
    assert env["POLPO_FEEDBACK"] == ""
    assert env["POLPO_ATTEMPT_KIND"] == "initial"
    assert env["PATH"] == os.environ["PATH"]


@pytest.mark.anyio
async def test_json_request_on_stdin(tmp_path: Path) -> None:
    req = _request(tmp_path)
    res = await CommandAgent("cat", ["cat"], clock=SystemClock()).run(req, on_start=_noop)
    assert res.exit_code == 0
    assert json.loads(res.stdout_tail) == {
        "taskId": "task-1",
        "missionId": "mission-9",
        "missionName": "Build the thing",
        "title": "Write hello",
        "description": "Create hello.txt with a greeting",
        "prompt": req.prompt,
        "feedback": "the file was empty",
        "workspace": str(tmp_path),
        "attempt": {"id": "att-42", "number": 2, "kind": "fix"},
        "expectations": [{"type": "file_exists", "paths": ["hello.txt"]}],
        "expectedOutcomes": [],
        "clarifications": [],
    }


@pytest.mark.anyio
async def test_runs_in_the_workspace_and_creates_it(tmp_path: Path) -> None:
    workspace = tmp_path / "deep" / "ws"
    agent = CommandAgent("dev", ["bash", "-c", "pwd; echo hi > hello.txt"], clock=SystemClock())
    pids: list[int] = []
    res = await agent.run(_request(workspace), on_start=pids.append)
    assert res.exit_code == 0
    assert await anyio.Path(res.stdout_tail.strip()).resolve() == await anyio.Path(workspace).resolve()
    assert await anyio.Path(workspace / "hello.txt").read_text() == "hi\n"
    assert len(pids) == 1 and pids[0] > 1
    assert res.ok


@pytest.mark.anyio
async def test_request_timeout_wins_over_default(tmp_path: Path) -> None:
    agent = CommandAgent("slow", ["sleep", "60"], clock=SystemClock(), default_timeout=600, grace=1)
    res = await agent.run(_request(tmp_path, timeout=0.5), on_start=_noop)
    assert res.timed_out
    assert res.exit_code is None
    assert not res.ok


@pytest.mark.anyio
async def test_default_timeout_applies_when_request_has_none(tmp_path: Path) -> None:
    agent = CommandAgent("slow", ["sleep", "60"], clock=SystemClock(), default_timeout=0.5, grace=1)
    res = await agent.run(_request(tmp_path, timeout=None), on_start=_noop)
    assert res.timed_out


@pytest.mark.anyio
async def test_missing_program_is_reported_not_raised(tmp_path: Path) -> None:
    agent = CommandAgent("ghost", ["polpo-no-such-agent-cli", "{prompt}"], clock=SystemClock())
    res = await agent.run(_request(tmp_path), on_start=_noop)
    assert res.error == "command not found: polpo-no-such-agent-cli"
    assert res.exit_code is None
    assert not res.ok


@pytest.mark.anyio
async def test_exit_code_and_output_are_reported(tmp_path: Path) -> None:
    agent = CommandAgent("dev", ["bash", "-c", "echo working; echo broken >&2; exit 7"], clock=SystemClock())
    res = await agent.run(_request(tmp_path), on_start=_noop)
    assert res.exit_code == 7
    assert res.stdout_tail == "working\n"
    assert res.stderr_tail == "broken\n"
    assert res.stdout_bytes == 8
    assert res.error is None


def test_a_text_too_long_for_a_variable_is_left_to_stdin(tmp_path: Path) -> None:
    from polpo.agents.command import ENV_TEXT_MAX, agent_env, agent_stdin

    req = _request(tmp_path)
    long = "y" * (ENV_TEXT_MAX + 1)
    big = dataclasses.replace(req, prompt=long, description=long)
    env = agent_env(big)
    assert env["POLPO_PROMPT"] == "" and env["POLPO_PROMPT_ON_STDIN"] == "1"
    assert env["POLPO_TASK_DESCRIPTION"] == "" and env["POLPO_TASK_DESCRIPTION_ON_STDIN"] == "1"
    assert "POLPO_FEEDBACK_ON_STDIN" not in env
    assert long in agent_stdin(big).decode()  # the whole text is still given
