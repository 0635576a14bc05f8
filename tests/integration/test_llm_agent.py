"""LLMAgent against FakeLLM over real HTTP (through LLMClient and litellm), in a real temporary workspace."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polpo.agents.base import Agent, AgentRequest, AgentResult
from polpo.agents.llm import LLMAgent
from polpo.agents.transcript import files_touched, timeline_text
from polpo.clock import SystemClock
from polpo.llm.client import LLMClient, ModelSettings, load_litellm
from polpo.tools.catalog import TOOLS
from polpo.tools.commands import command_env
from polpo.tools.registry import ToolContext
from tests.support.fake_llm import FakeLLM, delay, error, raw, text, tool_call, tool_calls
from tests.support.procs import dies

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("fake_llm_key")]

MODEL = "openai/fake-model"
KEY_ENV = "POLPO_TEST_FAKE_LLM_KEY"  # a name that does not look secret: redaction must still catch its value
KEY = "sk-test-abc123def456ghi789"
MARK = ("POLPO_TEST_ATTEMPT_MARK", "state|attempt-7")


@pytest.fixture
def srv() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def make_agent(srv: FakeLLM, **kwargs: Any) -> LLMAgent:
    client = kwargs.pop("client", None) or LLMClient(backoff=0.01)
    settings = ModelSettings(MODEL, api_base=srv.base_url, api_key_env=KEY_ENV, timeout=10.0)
    return LLMAgent("dev", settings, client=client, clock=SystemClock(), **kwargs)


def make_request(ws: Path, **changes: Any) -> AgentRequest:
    base = AgentRequest(
        task_id="m/task-1", mission_id="m", mission_name="Greeter", attempt_id="m/task-1/1", attempt_number=1,
        kind="initial", title="Fix the greeting", description="Make greet() say hello to its argument.",
        prompt="(built by the engine for command agents)", feedback=None, workspace=ws, timeout=30.0,
        expectations=[{"type": "test", "command": "python -m pytest"}], env_marker=MARK,
        mission_goal="A friendly greeter package.", siblings=(("Write docs", "pending"), ("Set up CI", "done")),
    )
    return dataclasses.replace(base, **changes)


async def run(agent: LLMAgent, request: AgentRequest) -> tuple[AgentResult, list[int | None]]:
    await load_litellm()  # imported first, as the daemon does at start: a session limit must not time the import
    started: list[int | None] = []
    result = await agent.run(request, on_start=started.append)
    return result, started


def tool_messages(srv: FakeLLM) -> list[str]:
    """The tool results the model received, from the last request (it carries the whole conversation)."""
    return [m["content"] for m in srv.requests[-1]["messages"] if m["role"] == "tool"]


def tool_entries(result: AgentResult) -> list[dict[str, Any]]:
    return [e for e in result.transcript or [] if e["type"] == "tool"]


# --------------------------------------------------------------------------------------------------- sessions


async def test_a_session_lists_reads_edits_writes_and_finishes(srv: FakeLLM, ws: Path) -> None:
    (ws / "greet.py").write_text("def greet(name):\n    return 'bye'\n")
    srv.script(
        tool_call("list_dir", {"path": "."}, content="Let me look around."),
        tool_call("read_file", {"path": "greet.py"}),
        tool_call("edit_file", {"path": "greet.py", "old": "'bye'", "new": "f'hello {name}'"}),
        tool_calls([("write_file", {"path": "tests/test_greet.py", "content": "from greet import greet\n"}),
                    ("grep", {"pattern": "hello"})]),
        text("Done: greet() now says hello; added a test file."),
    )
    agent = make_agent(srv)
    result, started = await run(agent, make_request(ws))

    assert result.ok and result.exit_code == 0 and not result.timed_out
    assert result.stdout_tail == "Done: greet() now says hello; added a test file."
    assert result.stdout_bytes == len(result.stdout_tail)
    assert (ws / "greet.py").read_text() == "def greet(name):\n    return f'hello {name}'\n"
    assert (ws / "tests" / "test_greet.py").read_text() == "from greet import greet\n"
    assert started == []  # no process of its own: the runner marks LLM attempts running itself
    assert result.model == MODEL and result.tokens > 0 and result.duration > 0

    transcript = result.transcript or []
    assert [e["type"] for e in transcript] == ["assistant", "tool"] * 3 + ["assistant", "tool", "tool", "assistant"]
    assert [e["turn"] for e in transcript] == [1, 1, 2, 2, 3, 3, 4, 4, 4, 5]
    assert transcript[0]["text"] == "Let me look around."
    assert transcript[0]["toolCalls"][0]["name"] == "list_dir"
    assert json.loads(transcript[0]["toolCalls"][0]["arguments"]) == {"path": "."}
    assert transcript[1]["result"] == "greet.py" and transcript[1]["ok"] is True
    assert "return 'bye'" in transcript[3]["result"]
    assert transcript[-1]["text"].startswith("Done:") and transcript[-1]["toolCalls"] == []
    assert result.tokens == sum(e["tokens"] for e in transcript if e["type"] == "assistant")
    assert all(e["ts"].endswith("Z") for e in transcript)
    json.dumps(transcript)  # JSON-able as stored
    assert files_touched(transcript) == {"created": ["tests/test_greet.py"], "edited": ["greet.py"]}
    timeline = timeline_text(transcript, 4000)
    assert "edit_file" in timeline and "final answer: Done:" in timeline

    # What the model was sent: instructions, the task in context, every tool, and the tool results in order.
    first = srv.requests[0]
    assert first["model"] == "fake-model" and first["tool_choice"] == "auto"
    assert first.headers["authorization"] == f"Bearer {KEY}"
    assert [t["function"]["name"] for t in first["tools"]] == list(TOOLS.names)
    system, user = first["messages"][0]["content"], first["messages"][1]["content"]
    assert "without calling any tool" in system.lower()
    for needle in ("Fix the greeting", "Make greet() say hello", "Greeter", "A friendly greeter package.",
                   "Write docs — pending", "Set up CI — done", "test: `python -m pytest`"):
        assert needle in user
    assert "(built by the engine" not in user
    assert len(srv.requests) == 5
    results = tool_messages(srv)
    assert results[0] == "greet.py" and results[2].startswith("edited greet.py")
    assert results[3].startswith("wrote 24 bytes") and "greet.py:2:" in results[4]


async def test_fix_attempt_carries_feedback_and_role(srv: FakeLLM, ws: Path) -> None:
    srv.script(text("fixed"))
    agent = make_agent(srv, role="backend developer")
    request = make_request(ws, kind="fix", attempt_number=2, feedback="- test: 1 failed (test_greet)")
    result, _ = await run(agent, request)
    assert result.ok
    system, user = (m["content"] for m in srv.requests[0]["messages"][:2])
    assert "backend developer" in system
    assert "targeted fix" in user and "do not start over" in user and "- test: 1 failed (test_greet)" in user


async def test_custom_system_prompt_replaces_the_default(srv: FakeLLM, ws: Path) -> None:
    srv.script(text("ok"))
    agent = make_agent(srv, system_prompt="You are terse.", role="reviewer")
    await run(agent, make_request(ws))
    assert srv.requests[0]["messages"][0]["content"] == "You are terse.\n\nYour role: reviewer"


# ------------------------------------------------------------------------------------------ tool call problems


async def test_malformed_json_arguments_come_back_as_an_error_and_the_session_goes_on(
    srv: FakeLLM, ws: Path
) -> None:
    srv.script(
        tool_call("write_file", '{"path": "a.txt", "content": "unterminated'),
        tool_call("write_file", {"path": "a.txt", "content": "fine"}),
        text("recovered"),
    )
    result, _ = await run(make_agent(srv), make_request(ws))
    assert result.ok and result.stdout_tail == "recovered"
    first, second = tool_messages(srv)
    assert first.startswith("Error:") and "not valid JSON" in first
    assert second.startswith("wrote 4 bytes")
    assert (ws / "a.txt").read_text() == "fine"
    entries = tool_entries(result)
    assert entries[0]["ok"] is False and entries[0]["error"] == "invalid_json"
    assert result.transcript is not None
    assert result.transcript[0]["toolCalls"][0]["arguments"] == '{"path": "a.txt", "content": "unterminated'
    # replayed to the provider as {} (some litellm adapters parse earlier calls' arguments and would fail)
    replayed = srv.requests[1]["messages"][2]
    assert replayed["role"] == "assistant" and replayed["tool_calls"][0]["function"]["arguments"] == "{}"


async def test_unknown_tool_and_bad_arguments(srv: FakeLLM, ws: Path) -> None:
    srv.script(
        tool_calls([("delete_everything", {"really": True}), ("read_file", {"path": "x", "mode": "rb"}),
                    ("read_file", "[1, 2]")]),
        text("ok"),
    )
    result, _ = await run(make_agent(srv), make_request(ws))
    assert result.ok
    unknown, extra, not_object = tool_messages(srv)
    assert unknown.startswith("Error: unknown tool 'delete_everything'") and "run_command" in unknown
    assert extra.startswith("Error:") and "'mode'" in extra
    assert not_object.startswith("Error:") and "JSON object" in not_object
    assert [e["error"] for e in tool_entries(result)] == ["unknown_tool", "invalid_arguments", "invalid_arguments"]


async def test_paths_outside_the_workspace_are_refused_and_never_reach_the_model(
    srv: FakeLLM, ws: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP-SECRET-CONTENT-4711\n")
    (ws / "link").symlink_to(outside)
    (ws / "leak.txt").symlink_to(outside / "secret.txt")
    srv.script(
        tool_calls([
            ("read_file", {"path": "../../etc/passwd"}),
            ("read_file", {"path": "/etc/passwd"}),
            ("read_file", {"path": "link/secret.txt"}),
            ("read_file", {"path": "leak.txt"}),
            ("edit_file", {"path": "leak.txt", "old": "TOP", "new": "X"}),
            ("write_file", {"path": "link/new.txt", "content": "x"}),
            ("register_outcome", {"type": "file", "label": "s", "path": "leak.txt"}),
        ]),
        tool_call("grep", {"pattern": "TOP-SECRET"}),
        tool_call("list_dir", {"path": "."}),
        text("nothing to see"),
    )
    result, _ = await run(make_agent(srv), make_request(ws))
    assert result.ok
    results = tool_messages(srv)
    assert all(r.startswith("Error:") for r in results[:7]), results
    assert "TOP-SECRET-CONTENT" not in results[7]  # grep does not follow the link out
    assert "outside the workspace" in results[8]
    assert (outside / "secret.txt").read_text() == "TOP-SECRET-CONTENT-4711\n"
    assert not (outside / "new.txt").exists()
    sent = json.dumps([dict(r) for r in srv.requests])
    assert "TOP-SECRET-CONTENT" not in sent and "root:x:0:0" not in sent
    assert "TOP-SECRET-CONTENT" not in json.dumps(result.transcript) and result.outcomes == []


# ----------------------------------------------------------------------------------------------- endings


async def test_max_turns_reached_is_a_failure_with_the_reason(srv: FakeLLM, ws: Path) -> None:
    # calls that differ each turn (the same call again and again ends earlier: test_llm_agent_repeats)
    srv.script(*(tool_call("glob", {"pattern": f"*.{i}"}) for i in range(3)))
    result, _ = await run(make_agent(srv, max_turns=3), make_request(ws))
    assert not result.ok and result.exit_code == 1 and result.error is None
    assert "max_turns (3) reached" in result.stderr_tail
    assert result.stderr_bytes == len(result.stderr_tail.encode())
    assert len(srv.requests) == 3 and srv.pending == 0 and srv.unscripted == 0
    assert result.transcript is not None
    assert result.transcript[-1]["type"] == "error" and result.transcript[-1]["kind"] == "max_turns"
    results = tool_messages(srv)
    assert "1 model turn(s) left" in results[-1]  # the model was told to wrap up


async def test_rate_limit_is_retried_then_succeeds(srv: FakeLLM, ws: Path) -> None:
    srv.script(error(429), text("done after a retry"))
    client = LLMClient(backoff=0.01)
    result, _ = await run(make_agent(srv, client=client), make_request(ws))
    assert result.ok and result.stdout_tail == "done after a retry"
    assert len(srv.requests) == 2 and client.calls == 2
    assert result.transcript is not None
    assert result.transcript[0]["retries"] == 1 and "RateLimit" in result.transcript[0]["retryErrors"][0]


async def test_a_model_error_ends_the_attempt_with_the_redacted_message(srv: FakeLLM, ws: Path) -> None:
    srv.script(tool_call("list_dir", {}), error(400, {"error": {"message": f"bad request near {KEY}",
                                                                  "type": "invalid_request_error"}}))
    result, _ = await run(make_agent(srv), make_request(ws))
    assert not result.ok and result.exit_code is None and not result.timed_out
    assert result.error is not None and "bad_request" in result.error
    assert KEY not in result.error and KEY not in json.dumps(result.transcript)
    assert result.transcript is not None
    assert [e["type"] for e in result.transcript] == ["assistant", "tool", "error"]


async def test_a_broken_completion_is_an_error_not_a_crash(srv: FakeLLM, ws: Path) -> None:
    srv.script(raw('{"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}'))
    result, _ = await run(make_agent(srv), make_request(ws))
    assert not result.ok and result.error is not None and result.error.startswith("model call failed")


async def test_missing_api_key_is_an_error_not_a_crash(srv: FakeLLM, ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV)
    result, _ = await run(make_agent(srv), make_request(ws))
    assert result.error is not None and KEY_ENV in result.error and srv.requests == []


async def test_the_session_time_limit_stops_a_slow_model(srv: FakeLLM, ws: Path) -> None:
    srv.script(tool_call("list_dir", {}), delay(30, text("too late")))
    # 3 s: room for litellm's first call (its set-up takes about a second on a loaded machine)
    result, _ = await run(make_agent(srv), make_request(ws, timeout=3.0))
    assert result.timed_out and not result.ok and result.exit_code is None
    assert "timed out after 3 s" in result.stderr_tail
    assert result.transcript is not None and result.transcript[-1]["kind"] == "timeout"
    assert len(tool_entries(result)) == 1  # what happened before the limit is kept


async def test_the_session_time_limit_kills_a_running_command(srv: FakeLLM, ws: Path) -> None:
    srv.script(tool_call("run_command", {"command": "sleep 30 & echo $! > bg.pid; sleep 30"}), text("never"))
    result, _ = await run(make_agent(srv), make_request(ws, timeout=3.0))  # room for litellm's first call
    assert result.timed_out
    bg = int((ws / "bg.pid").read_text())
    assert await dies(bg)
    assert len(srv.requests) == 1


async def test_default_timeout_applies_when_the_request_has_none(srv: FakeLLM, ws: Path) -> None:
    srv.script(delay(5, text("too late")))
    result, _ = await run(make_agent(srv, default_timeout=0.5), make_request(ws, timeout=None))
    assert result.timed_out


# ----------------------------------------------------------------------------------------------- run_command


async def test_run_command_in_the_workspace_without_secrets_and_killed_at_its_timeout(
    srv: FakeLLM, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-should-never-leak-1")
    monkeypatch.setenv("FAKE_API_KEY", "sk-fake-should-never-leak-22")
    (ws.parent / "stolen.txt").write_text(f"openai=sk-openai-should-never-leak-1 key={KEY}\n")
    srv.script(
        tool_call("run_command", {"command": "pwd; env; echo out > made.txt; echo oops >&2; exit 3"}),
        tool_call("run_command", {"command": "sleep 30 & echo $! > bg.pid; sleep 30; echo never",
                                  "timeout": 600}),
        tool_call("run_command", {"command": "   "}),
        tool_call("run_command", {"command": "cat ../stolen.txt"}),
        text("done"),
    )
    result, started = await run(make_agent(srv, command_timeout=1.0), make_request(ws))
    assert result.ok and started == []
    first, second, empty, stolen = tool_messages(srv)
    assert first.startswith("exit code 3") and "oops" in first
    assert os.path.realpath(ws) in first  # cwd is the workspace
    assert f"{MARK[0]}={MARK[1]}" in first  # the orphan marker is in the environment
    for name in ("OPENAI_API_KEY", "FAKE_API_KEY", KEY_ENV):
        assert name not in first  # not even the name: the variables are not there at all
    assert (ws / "made.txt").read_text() == "out\n"
    assert second.startswith("Error: the command timed out after 1 s")  # capped by command_timeout
    assert "never" not in second
    bg = int((ws / "bg.pid").read_text())
    assert await dies(bg)  # the whole group was killed, not only the shell
    assert empty.startswith("Error:") and "non-empty" in empty
    # run_command is no file-system sandbox (it can read ../stolen.txt), but the values of secret variables and
    # the API key are masked in its output before it reaches the model or the transcript.
    assert stolen.startswith("exit code 0") and "openai=*** key=***" in stolen
    sent = json.dumps([dict(r) for r in srv.requests]) + json.dumps(result.transcript)
    assert "should-never-leak" not in sent and KEY not in sent
    entries = tool_entries(result)
    assert entries[0]["data"]["exit_code"] == 3 and entries[0]["ok"] is True
    assert entries[1]["ok"] is False and entries[1]["error"] == "timeout"


# ------------------------------------------------------------------------------------------- secrets, outcomes


async def test_the_api_key_appears_nowhere_in_the_transcript_or_result(srv: FakeLLM, ws: Path) -> None:
    srv.script(
        tool_call("write_file", {"path": "notes.txt", "content": f"the key is {KEY}"}, content=f"I see {KEY}"),
        tool_call("read_file", {"path": "notes.txt"}),
        tool_call("register_outcome", {"type": "text", "label": "key", "value": KEY}),
        text(f"done; by the way the key is {KEY}"),
    )
    result, _ = await run(make_agent(srv), make_request(ws))
    assert result.ok
    assert srv.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it was used…
    dumped = json.dumps(dataclasses.asdict(result))
    assert KEY not in dumped  # …and recorded nowhere
    assert "***" in result.stdout_tail and "***" in json.dumps(result.transcript)
    assert all(KEY not in r for r in tool_messages(srv))  # file content echoed back to the model is masked too


async def test_register_outcome_records_valid_declarations(srv: FakeLLM, ws: Path) -> None:
    srv.script(
        tool_call("write_file", {"path": "out/report.md", "content": "# Report\n"}),
        tool_calls([
            ("register_outcome", {"type": "file", "label": "Report", "path": "out/report.md"}),
            ("register_outcome", {"type": "url", "label": "Preview", "value": "https://example.com/p"}),
            ("register_outcome", {"type": "json", "label": "Stats", "value": '{"lines": 1}'}),
            ("register_outcome", {"type": "text", "label": "Answer", "value": "42"}),
            ("register_outcome", {"type": "text", "label": "Answer", "value": "43"}),
            ("register_outcome", {"type": "file", "label": "Missing", "path": "nope.md"}),
            ("register_outcome", {"type": "file", "label": "Escape", "path": "../x"}),
            ("register_outcome", {"type": "url", "label": "Bad", "value": "ftp://x"}),
            ("register_outcome", {"type": "json", "label": "Bad", "value": "{nope"}),
            ("register_outcome", {"type": "media", "label": "Bad", "value": "x"}),
            ("register_outcome", {"type": "text", "label": " ", "value": "x"}),
        ]),
        text("registered"),
    )
    result, _ = await run(make_agent(srv), make_request(ws))
    assert result.ok
    assert result.outcomes == [
        {"type": "file", "label": "Report", "value": "out/report.md", "path": "out/report.md"},
        {"type": "url", "label": "Preview", "value": "https://example.com/p"},
        {"type": "json", "label": "Stats", "value": {"lines": 1}},
        {"type": "text", "label": "Answer", "value": "43"},
    ]
    results = tool_messages(srv)[1:]
    assert all(r.startswith("registered") for r in results[:5])
    assert all(r.startswith("Error:") for r in results[5:]), results[5:]


async def test_request_model_overrides_the_agent_model(srv: FakeLLM, ws: Path) -> None:
    srv.script(text("done by the strong model"))
    result, _ = await run(make_agent(srv), make_request(ws, model="openai/strong-model"))
    assert result.ok and result.model == "openai/strong-model"
    assert srv.requests[0]["model"] == "strong-model"
    assert result.transcript is not None and result.transcript[0]["model"] == "openai/strong-model"


async def test_the_workspace_is_created_when_missing(srv: FakeLLM, tmp_path: Path) -> None:
    srv.script(tool_call("write_file", {"path": "a.txt", "content": "x"}), text("ok"))
    ws = tmp_path / "new" / "ws"
    result, _ = await run(make_agent(srv), make_request(ws))
    assert result.ok and (ws / "a.txt").read_text() == "x"


def test_llm_agent_satisfies_the_protocol(srv: FakeLLM) -> None:
    agent: Agent = make_agent(srv)
    assert agent.name == "dev"
    with pytest.raises(ValueError):
        make_agent(srv, max_turns=0)


async def test_run_command_validates_its_arguments(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-should-not-be-seen")
    ctx = ToolContext(ws, clock=SystemClock(), command_timeout=5)
    for args, needle in [({"command": "true", "timeout": 0}, "greater than 0"),
                         ({"command": "true", "timeout": "x"}, "must be a number"),
                         ({"command": "true", "timeout": True}, "must be a number"),
                         ({"command": "true", "timeout": "nan"}, "finite"),
                         ({"command": 3}, "must be a string"), ({"command": " "}, "non-empty string"),
                         ({"command": "true", "shell": "zsh"}, "'shell'"), ({"command": "x" * 20_001}, "at most")]:
        out = await TOOLS.dispatch(ctx, "run_command", args)
        assert not out.ok and out.text.startswith("Error:") and needle in out.text, (args, out.text)
        assert out.data == {"error": "invalid_arguments", "tool": "run_command"}
    out = await TOOLS.dispatch(ctx, "run_command",
                               {"command": "echo $GITHUB_TOKEN; printf 'x%.0s' $(seq 12000)", "timeout": "2"})
    assert out.ok and "ghp-" not in out.text and "earlier bytes not shown" in out.text
    assert len(out.text) < 10_200
    env = command_env(("MARK", "v"))
    assert env["MARK"] == "v" and "GITHUB_TOKEN" not in env
