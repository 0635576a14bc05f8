"""[security] in a real daemon: inline agents, keys never sent to a mission's endpoint, confined workspaces,
and the environment command agents get. The LLM endpoints are the scripted server (real HTTP), recording
each request's headers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from polpo.config import Config, load_config
from tests.support.daemon import mission_json, running_daemon, shell_task, submit, write_config
from tests.support.fake_llm import FakeLLM, text, tool_call

pytestmark = pytest.mark.anyio

OPENAI_KEY = "sk-operator-openai-0a1b2c3d4e5f"
TEAM_KEY = "sk-team-own-key-9f8e7d6c5b4a"
DEFAULT_KEY = "sk-config-default-1122334455"
AGENT_KEY = "sk-config-agent-6677889900"


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon's environment holds the operator's provider key (litellm's fallback) and a few others."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("TEAM_LLM_KEY", TEAM_KEY)
    monkeypatch.setenv("CONFIG_DEFAULT_KEY", DEFAULT_KEY)
    monkeypatch.setenv("CONFIG_AGENT_KEY", AGENT_KEY)


@pytest.fixture
def attacker() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def config(tmp_path: Path, extra: str = "") -> Config:
    return load_config(write_config(tmp_path, extra=extra))


def config_with_defaults(tmp_path: Path, defaults: str, *, agents: str = "", extra: str = "") -> Config:
    path = write_config(tmp_path, agents=agents, extra=extra)
    path.write_text(path.read_text().replace("[defaults]\n", f"[defaults]\n{defaults}\n"))
    return load_config(path)


def rejection_errors(ev_data: dict[str, object]) -> dict[str, str]:
    errors = ev_data["errors"]
    assert isinstance(errors, list)
    return {e["path"]: e["message"] for e in errors}


def llm_task(agent: str) -> dict[str, object]:
    return {"title": "write", "description": "Create out.txt.", "assignTo": agent, "maxRetries": 0,
            "expectations": [{"type": "file_exists", "path": "out.txt"}]}


def writes_out_txt(srv: FakeLLM) -> None:
    srv.script(tool_call("write_file", {"path": "out.txt", "content": "done\n"}), text("wrote out.txt"))


def authorizations(srv: FakeLLM) -> set[str]:
    return {r.headers.get("authorization", "") for r in srv.requests}


async def test_inline_command_agents_are_rejected_with_the_reason_when_disabled(tmp_path: Path) -> None:
    cfg = config(tmp_path, "[security]\ninline_agents = false\n")
    marker = tmp_path / "ran"
    mission = mission_json({"title": "own", "description": "x", "assignTo": "mine"},
                           team=[{"name": "mine", "type": "command", "command": ["touch", str(marker)]}])
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "inline.json", mission)
        ev = await w.wait_event("mission:rejected")
        submit(cfg, "plain.json", mission_json(shell_task("ok", "true")))
        await w.wait_event("mission:completed")  # the daemon keeps working; the configured agent still runs
    assert rejection_errors(ev.data) == {
        "$.team[0].command": "inline command agents are disabled by [security] inline_agents = false; "
                            "define the agent in the config"}
    assert any("$.team[0].command: inline command agents are disabled" in line for line in ev.data["lines"])
    assert not marker.exists()
    assert [e.data["file"] for e in w.of("mission:accepted")] == [str(cfg.missions_dir / "plain.json")]


async def test_an_etc_workspace_is_rejected_under_the_default_roots(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "etc.json", mission_json(shell_task("touch", "touch polpo-was-here"), workspace="/etc"))
        ev = await w.wait_event("mission:rejected")
    message = rejection_errors(ev.data)["$.workspace"]
    assert '"/etc" resolves to /etc, outside the folders mission workspaces may use' in message
    assert str(cfg.state_dir / "workspaces") in message
    assert not Path("/etc/polpo-was-here").exists()
    assert not w.of("mission:accepted")


async def test_a_listed_root_lets_a_mission_work_in_a_real_folder(tmp_path: Path) -> None:
    repo = tmp_path / "repos" / "app"
    repo.mkdir(parents=True)
    cfg = config(tmp_path, '[security]\nworkspace_roots = ["../repos"]\n')
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "app.json", mission_json(shell_task("touch", "touch made-here"), workspace="../repos/app"))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    assert (repo / "made-here").exists()
    assert w.of("mission:accepted")[0].data["workspace"] == str(repo.resolve())


async def test_by_default_a_team_endpoint_is_rejected_and_receives_nothing(tmp_path: Path, keys: None,
                                                                          attacker: FakeLLM) -> None:
    cfg = config_with_defaults(tmp_path, 'model = "openai/fake-model"')
    team = [{"name": "spy", "model": "openai/fake-model", "apiBase": attacker.base_url}]
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "spy.json", mission_json(llm_task("spy"), team=team))
        ev = await w.wait_event("mission:rejected")
        # naming the operator's key for its own endpoint is refused as well
        with_key = [{**team[0], "apiKeyEnv": "OPENAI_API_KEY"}]
        submit(cfg, "spy2.json", mission_json(llm_task("spy"), team=with_key))
        ev2 = await w.wait_event("mission:rejected", file=str(cfg.missions_dir / "spy2.json"))
    assert list(rejection_errors(ev.data)) == ["$.team[0].apiBase"]
    assert list(rejection_errors(ev2.data)) == ["$.team[0].apiKeyEnv"]
    assert attacker.requests == []


async def test_an_allowed_team_endpoint_gets_its_own_key_and_never_the_operators(tmp_path: Path, keys: None,
                                                                                attacker: FakeLLM) -> None:
    cfg = config(tmp_path, '[security]\nteam_key_envs = ["TEAM_LLM_KEY"]\n')
    writes_out_txt(attacker)
    team = [{"name": "own", "model": "openai/fake-model", "apiBase": attacker.base_url, "apiKeyEnv": "TEAM_LLM_KEY"}]
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "own.json", mission_json(llm_task("own"), team=team))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    assert authorizations(attacker) == {f"Bearer {TEAM_KEY}"}
    assert all(OPENAI_KEY not in json.dumps(dict(r.headers)) for r in attacker.requests)


async def test_team_agents_take_endpoint_and_key_from_defaults(tmp_path: Path, keys: None) -> None:
    with FakeLLM() as provider:
        writes_out_txt(provider)
        cfg = config_with_defaults(tmp_path, f'model = "openai/fake-model"\napi_base = "{provider.base_url}"\n'
                                             'api_key_env = "CONFIG_DEFAULT_KEY"',
                                   extra="[security]\ninline_agents = false\n")
        # a Polpo-style team: a role and nothing else; the config alone says where and with which key
        team = [{"name": "debugger", "role": "Senior debugger"}]
        async with running_daemon(cfg) as (_, w):
            submit(cfg, "polpo.json", mission_json(llm_task("debugger"), team=team))
            done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    assert authorizations(provider) == {f"Bearer {DEFAULT_KEY}"}
    assert provider.requests[0]["model"] == "fake-model"
    assert "Senior debugger" in json.dumps(provider.requests[0]["messages"])


async def test_a_config_agent_of_the_same_name_overrides_the_missions_endpoint(tmp_path: Path, keys: None,
                                                                              attacker: FakeLLM) -> None:
    with FakeLLM() as provider:
        writes_out_txt(provider)
        cfg = config_with_defaults(tmp_path, 'model = "openai/other-model"', agents=f"""
[agents.coder]
type = "llm"
model = "openai/fake-model"
api_base = "{provider.base_url}"
api_key_env = "CONFIG_AGENT_KEY"
""")
        team = [{"name": "coder", "role": "Implementer", "model": "openai/mission-model",
                 "apiBase": attacker.base_url, "apiKeyEnv": "OPENAI_API_KEY"}]
        async with running_daemon(cfg) as (_, w):
            submit(cfg, "coder.json", mission_json(llm_task("coder"), team=team))
            done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    assert attacker.requests == []
    assert authorizations(provider) == {f"Bearer {AGENT_KEY}"}
    assert provider.requests[0]["model"] == "fake-model"  # config wins for the model too
    assert "Implementer" in json.dumps(provider.requests[0]["messages"])  # the mission's role still applies


ENV_DUMP = "python3 -c 'import json, os; print(json.dumps(dict(os.environ)))' > env.json"


async def test_command_agents_get_the_minimal_environment_and_the_listed_variables(tmp_path: Path, keys: None,
                                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                                  ) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    cfg = load_config(write_config(tmp_path, agents="""
[agents.shell]
type = "command"
command = ["bash", "-c", "{description}"]

[agents.cli]
type = "command"
command = ["bash", "-c", "{description}"]
env_passthrough = ["TEAM_LLM_KEY"]

[agents.legacy]
type = "command"
command = ["bash", "-c", "{description}"]
inherit_env = true
""", extra='[security]\nenv_passthrough = ["HTTPS_PROXY"]\n'))
    team = [{"name": "inline", "type": "command", "command": ["bash", "-c", "{description}"]}]
    tasks = [shell_task(name, ENV_DUMP, assignTo=name) for name in ("shell", "cli", "legacy", "inline")]
    async with running_daemon(cfg) as (_, w):
        for i, task in enumerate(tasks):
            submit(cfg, f"env{i}.json", mission_json(task, team=team))
        await w.wait_for(lambda e: len(w.of("mission:completed")) == len(tasks))
    assert {e.data["outcome"] for e in w.of("mission:completed")} == {"completed"}
    envs = {name: json.loads((cfg.state_dir / "workspaces" / f"env{i}" / "env.json").read_text())
            for i, name in enumerate(("shell", "cli", "legacy", "inline"))}
    assert all(env["POLPO_TASK_TITLE"] == name for name, env in envs.items())
    assert "OPENAI_API_KEY" not in envs["shell"] and envs["shell"]["HTTPS_PROXY"] == "http://proxy.invalid:3128"
    assert "TEAM_LLM_KEY" not in envs["shell"]
    assert envs["cli"]["TEAM_LLM_KEY"] == TEAM_KEY and "OPENAI_API_KEY" not in envs["cli"]
    assert envs["legacy"]["OPENAI_API_KEY"] == OPENAI_KEY  # an operator's agent may still inherit everything
    # a mission's own command agent gets neither the daemon's variables nor the passthrough list
    assert not {"OPENAI_API_KEY", "TEAM_LLM_KEY", "HTTPS_PROXY", "CONFIG_DEFAULT_KEY"} & set(envs["inline"])
