"""[security]: what a mission may ask for beyond the config (team agents, keys, workspaces, command checks)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from polpo.config import Config, ConfigError, parse_config
from polpo.mission.loader import load_mission
from polpo.mission.schema import MissionSpec
from polpo.mission.security import Endpoint, policy_problems, team_endpoint, workspace_roots

TASK = {"title": "a", "description": "do a", "assignTo": "x"}


def config(tmp_path: Path, **sections: dict[str, Any]) -> Config:
    return parse_config({"daemon": {"state_dir": "state", "missions_dir": "missions"}, **sections},
                        tmp_path / "polpo.toml")


def spec(**top: Any) -> MissionSpec:
    top.setdefault("tasks", [TASK])
    result = load_mission(json.dumps(top).encode(), known_agents=None)
    assert result.spec is not None, result.problems
    return result.spec


def problems(tmp_path: Path, s: MissionSpec, cfg: Config) -> dict[str, str]:
    return {p.path: p.message for p in policy_problems(s, cfg, tmp_path / "missions" / "m.json")}


# ------------------------------------------------------------------------------------------- team agents

def test_inline_command_agents_run_by_default_and_are_refused_when_disabled(tmp_path: Path) -> None:
    s = spec(team=[{"name": "x", "type": "command", "command": ["bash", "-c", "id"]}])
    assert problems(tmp_path, s, config(tmp_path)) == {}
    found = problems(tmp_path, s, config(tmp_path, security={"inline_agents": False}))
    assert found == {"$.team[0].command": "inline command agents are disabled by [security] inline_agents = "
                                          "false; define the agent in the config"}


def test_an_inline_endpoint_without_its_own_key_is_refused_by_default(tmp_path: Path) -> None:
    s = spec(team=[{"name": "x", "model": "openai/m", "apiBase": "http://127.0.0.1:9/v1"}])
    found = problems(tmp_path, s, config(tmp_path))
    assert list(found) == ["$.team[0].apiBase"]
    assert '"apiKeyEnv"' in found["$.team[0].apiBase"] and "team_key_envs" in found["$.team[0].apiBase"]


def test_a_team_agent_may_only_name_a_key_the_config_lists(tmp_path: Path) -> None:
    s = spec(team=[{"name": "x", "apiBase": "http://127.0.0.1:9/v1", "apiKeyEnv": "OPENAI_API_KEY"}])
    found = problems(tmp_path, s, config(tmp_path, security={"team_key_envs": ["TEAM_KEY"]}))
    assert found == {"$.team[0].apiKeyEnv": '"OPENAI_API_KEY" is not one of the variables team agents may use '
                                            "([security] team_key_envs: TEAM_KEY)"}
    # a key on its own (the provider's endpoint) is held to the same list
    alone = spec(team=[{"name": "x", "apiKeyEnv": "AWS_SECRET_ACCESS_KEY"}])
    assert list(problems(tmp_path, alone, config(tmp_path))) == ["$.team[0].apiKeyEnv"]


def test_an_inline_endpoint_with_a_listed_key_is_allowed_unless_inline_agents_is_off(tmp_path: Path) -> None:
    s = spec(team=[{"name": "x", "apiBase": "http://127.0.0.1:9/v1", "apiKeyEnv": "TEAM_KEY"}])
    assert problems(tmp_path, s, config(tmp_path, security={"team_key_envs": ["TEAM_KEY"]})) == {}
    off = config(tmp_path, security={"team_key_envs": ["TEAM_KEY"], "inline_agents": False})
    assert list(problems(tmp_path, s, off)) == ["$.team[0].apiBase"]
    assert "inline_agents = false" in problems(tmp_path, s, off)["$.team[0].apiBase"]


def test_a_stray_command_does_not_exempt_an_llm_agent_from_the_key_rules(tmp_path: Path) -> None:
    # no "type": an LLM agent, whatever "command" says; its endpoint and key are checked all the same
    s = spec(team=[{"name": "x", "command": ["true"], "apiBase": "http://127.0.0.1:9/v1",
                    "apiKeyEnv": "OPENAI_API_KEY"}])
    assert list(problems(tmp_path, s, config(tmp_path))) == ["$.team[0].apiKeyEnv"]


def test_inline_agents_off_still_allows_plain_llm_team_agents(tmp_path: Path) -> None:
    s = spec(team=[{"name": "x", "role": "Senior debugger", "model": "openai/m"}])
    assert problems(tmp_path, s, config(tmp_path, security={"inline_agents": False})) == {}


def test_a_config_agent_of_the_same_name_wins_so_the_missions_endpoint_is_not_a_problem(tmp_path: Path) -> None:
    cfg = config(tmp_path, agents={"x": {"type": "llm", "model": "openai/cfg", "api_base": "http://cfg/v1",
                                         "api_key_env": "CFG_KEY"}}, security={"inline_agents": False})
    t = spec(team=[{"name": "x", "model": "openai/mine", "apiBase": "http://evil/v1", "apiKeyEnv": "OPENAI_API_KEY"}])
    assert problems(tmp_path, t, cfg) == {}
    assert team_endpoint(t.team[0], cfg) == Endpoint("openai/cfg", "http://cfg/v1", "CFG_KEY")


def test_endpoint_precedence_and_pairs(tmp_path: Path) -> None:
    cfg = config(tmp_path, defaults={"model": "openai/d", "api_base": "http://d/v1", "api_key_env": "D_KEY"},
                 agents={"named": {"type": "llm", "api_key_env": "N_KEY"}})
    team = spec(team=[{"name": "plain"}, {"name": "own", "model": "openai/o", "apiBase": "http://o/v1"},
                      {"name": "keyonly", "apiKeyEnv": "K"}, {"name": "named", "model": "openai/m"}]).team
    assert team_endpoint(team[0], cfg) == Endpoint("openai/d", "http://d/v1", "D_KEY")  # [defaults]
    assert team_endpoint(team[1], cfg) == Endpoint("openai/o", "http://o/v1", None)  # never [defaults]' key
    assert team_endpoint(team[2], cfg) == Endpoint("openai/d", None, "K")  # never [defaults]' endpoint
    # [agents.named] sets a key and no model: its key (with the provider's endpoint), the mission's model
    assert team_endpoint(team[3], cfg) == Endpoint("openai/m", None, "N_KEY")


def test_a_key_the_config_uses_cannot_be_listed_for_team_agents(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"security.team_key_envs: OPENAI_API_KEY is the key of agents.coder"):
        config(tmp_path, agents={"coder": {"type": "llm", "model": "openai/m", "api_key_env": "OPENAI_API_KEY"}},
               security={"team_key_envs": ["OPENAI_API_KEY"]})
    with pytest.raises(ConfigError, match=r"is the key of judge"):
        config(tmp_path, judge={"model": "openai/j", "api_key_env": "J"}, security={"team_key_envs": ["J"]})


# -------------------------------------------------------------------------------------------- workspaces

@pytest.mark.parametrize("workspace", ["/", "/etc", "../..", "..", "../state", "../state/polpo.db"])
def test_workspaces_outside_the_roots_are_refused(tmp_path: Path, workspace: str) -> None:
    cfg = config(tmp_path)
    found = problems(tmp_path, spec(workspace=workspace), cfg)
    assert list(found) == ["$.workspace"]
    assert f'"{workspace}" resolves to' in found["$.workspace"]
    assert str(tmp_path.resolve() / "state" / "workspaces") in found["$.workspace"]
    assert "[security] workspace_roots" in found["$.workspace"]


def test_workspaces_below_a_root_are_allowed_even_before_they_exist(tmp_path: Path) -> None:
    cfg = config(tmp_path, security={"workspace_roots": ["repos"]})
    assert workspace_roots(cfg) == [tmp_path.resolve() / "state" / "workspaces", tmp_path.resolve() / "repos"]
    for ws in ["../state/workspaces/mine", str(tmp_path / "repos"), str(tmp_path / "repos" / "app" / "new"),
               "../repos/app"]:
        assert problems(tmp_path, spec(workspace=ws), cfg) == {}, ws
    assert list(problems(tmp_path, spec(workspace="../repos-other"), cfg)) == ["$.workspace"]


def test_a_symlink_below_a_root_that_leads_out_is_refused(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    root = tmp_path / "state" / "workspaces"
    root.mkdir(parents=True)
    os.symlink("/etc", root / "etc-link")
    found = problems(tmp_path, spec(workspace=str(root / "etc-link")), cfg)
    assert "resolves to /etc," in found["$.workspace"]


# ---------------------------------------------------------------------------------------- command checks

def test_command_checks_can_be_refused(tmp_path: Path) -> None:
    task = {**TASK, "expectations": [{"type": "file_exists", "path": "a"}, {"type": "test", "command": "id"},
                                     {"type": "script", "command": "cat /etc/shadow"}]}
    s = spec(tasks=[task])
    assert problems(tmp_path, s, config(tmp_path)) == {}
    found = problems(tmp_path, s, config(tmp_path, security={"command_checks": False}))
    assert found == {
        "$.tasks[0].expectations[1]": "test checks from missions are disabled by [security] command_checks = "
                                      "false (use file_exists or llm_review checks)",
        "$.tasks[0].expectations[2]": "script checks from missions are disabled by [security] command_checks = "
                                      "false (use file_exists or llm_review checks)",
    }
