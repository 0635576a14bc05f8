"""[mcp.servers], the agents' mcp and approve_tools, and [questions]: what the config accepts and what it refuses,
with the key and the reason."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from polpo.config import ConfigError, parse_config
from polpo.config_tools import MissingVariable, expand, variables


def problems(raw: dict[str, Any], tmp_path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, tmp_path / "polpo.toml")
    return str(caught.value)


def coder(**fields: Any) -> dict[str, Any]:
    return {"agents": {"coder": {"type": "llm", "model": "openai/m", **fields}}}


def test_agents_name_servers_and_tools_the_config_has(tmp_path: Path) -> None:
    raw = {**coder(mcp=["gti"], approve_tools=["fs.write_file", "git.git_commit", "run_command"]),
           "mcp": {"servers": {"git": {"command": "mcp-server-git"}}}}
    message = problems(raw, tmp_path)
    assert 'agents.coder.mcp: no [mcp.servers.gti]; did you mean "git"?' in message
    assert "agents.coder.approve_tools: 'fs.write_file' names server 'fs', which its mcp list does not have" in message
    cmd = {"agents": {"sh": {"type": "command", "command": ["x"], "mcp": ["git"]}},
           "mcp": {"servers": {"git": {"command": "mcp-server-git"}}}}
    assert "agents.sh: mcp and approve_tools are for LLM agents" in problems(cmd, tmp_path)


@pytest.mark.parametrize(("server", "reason"), [
    ({}, "give either command"),
    ({"command": "x", "url": "http://h/mcp"}, "give either command"),
    ({"url": "http://h/mcp", "env": {"A": "b"}}, "env: only for a stdio server"),
    ({"url": "ftp://h/mcp"}, "expected http:// or https://"),
    ({"command": "x", "headers": {"A": "b"}}, "headers: only for an HTTP server"),
    ({"command": "x", "cwd": "../up"}, "a folder inside the task's workspace"),
    ({"command": "x", "cwd": "sub", "shared": True}, "a shared server serves every task"),
    ({"command": "x", "env": {"T": "$TOKEN"}}, "a $ must start ${NAME}"),
])
def test_a_server_is_one_transport_with_its_own_keys(tmp_path: Path, server: dict[str, Any], reason: str) -> None:
    assert reason in problems({"mcp": {"servers": {"s": server}}}, tmp_path)


def test_a_server_name_is_a_namespace(tmp_path: Path) -> None:
    assert "a server's name is 1-32 letters" in problems({"mcp": {"servers": {"a.b": {"command": "x"}}}}, tmp_path)


def test_defaults(tmp_path: Path) -> None:
    cfg = parse_config({**coder(mcp=["git"]), "mcp": {"servers": {"git": {"command": "g"}}}}, tmp_path / "p.toml")
    s = cfg.mcp.servers["git"]
    assert (s.timeout, s.start_timeout, s.shared, s.allow, s.deny) == (
        timedelta(seconds=60), timedelta(seconds=30), False, [], [])
    q = cfg.questions
    assert (q.timeout, q.on_timeout, q.max_per_task, q.on_approval_timeout) == (
        timedelta(hours=1), "answer", 2, "refuse")
    assert cfg.agents["coder"].ask_human is False


def test_variables_expand_from_the_environment_and_a_missing_one_is_named() -> None:
    env = {"TOKEN": "t0k", "USER_ID": "7"}
    assert expand("Bearer ${TOKEN} for ${USER_ID}, $$5", env) == "Bearer t0k for 7, $5"
    assert variables("${A}-${B} $$ ${A}") == ["A", "B", "A"]
    with pytest.raises(MissingVariable) as caught:
        expand("${NOPE}", env)
    assert str(caught.value) == "NOPE"
