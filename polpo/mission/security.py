"""What a mission may ask for beyond what the operator's config gives (``[security]``, docs/explanation/security.md).

Whoever can write to the missions folder chooses the mission's ``team``, ``workspace`` and checks. This module
is the one place that decides, as a pure function of the spec, the config and where the file lives, which of
those requests are refused: :func:`policy_problems` (the daemon's intake and ``polpo validate``/``submit``
apply it). It also says which endpoint, key and model a team agent really gets (:func:`team_endpoint`), so the
check and the agent factory cannot disagree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polpo.config import AgentConfig, Config, Defaults
from polpo.mission.loader import Problem
from polpo.mission.schema import MissionSpec, TaskSpec, TeamAgent

__all__ = ["Endpoint", "config_endpoint", "mission_workspace", "policy_problems", "team_endpoint",
           "unreachable", "workspace_roots"]

_COMMAND_CHECKS = ("test", "script")


@dataclass(frozen=True)
class Endpoint:
    """Where an LLM agent's calls go and with which key: None api_base is the provider's own endpoint, None
    api_key_env is the provider's default variable (only ever used for the provider's own endpoint)."""

    model: str | None
    api_base: str | None
    api_key_env: str | None


def _pair(api_base: str | None, api_key_env: str | None, defaults: Defaults) -> tuple[str | None, str | None]:
    """An agent's own endpoint and key, or else ``[defaults]``'s: the two go together, never half of each."""
    if api_base or api_key_env:
        return api_base, api_key_env
    return defaults.api_base, defaults.api_key_env


def config_endpoint(a: AgentConfig, cfg: Config) -> Endpoint:
    """A configured LLM agent's endpoint: its own settings, ``[defaults]`` for what it leaves out."""
    return Endpoint(a.model or cfg.defaults.model, *_pair(a.api_base, a.api_key_env, cfg.defaults))


def _override(t: TeamAgent, cfg: Config) -> AgentConfig | None:
    """The configured LLM agent of the same name, which an LLM team agent takes its endpoint, key and model from."""
    a = cfg.agents.get(t.name)
    return a if a is not None and a.type == "llm" and (t.type or "llm") == "llm" else None


def team_endpoint(t: TeamAgent, cfg: Config) -> Endpoint:
    """A team LLM agent's endpoint. Precedence: ``[agents.NAME]`` of the same name (config wins for model,
    endpoint and key), then the mission's own ``model``/``apiBase``/``apiKeyEnv``, then ``[defaults]``."""
    over = _override(t, cfg)
    if over is not None:
        return Endpoint(over.model or t.model or cfg.defaults.model,
                        *_pair(over.api_base, over.api_key_env, cfg.defaults))
    return Endpoint(t.model or cfg.defaults.model, *_pair(t.api_base, t.api_key_env, cfg.defaults))


def workspace_roots(cfg: Config) -> list[Path]:
    """The folders mission workspaces may lie in: ``<state_dir>/workspaces`` and ``[security] workspace_roots``."""
    return [(cfg.state_dir / "workspaces").resolve(), *(r.resolve() for r in cfg.security.workspace_roots)]


def unreachable(workspace: Path, roots: list[Path], node: str) -> str | None:
    """Why node ``node`` cannot run tasks in ``workspace`` (an "affinity": "any" mission another node accepted):
    it is not below the node's own workspace roots (another node's state folder, say), or not there; None: it can."""
    ws = workspace.resolve()
    if not any(ws == r or ws.is_relative_to(r) for r in roots):
        return (f"its workspace {ws} is not below node {node}'s workspace roots ({', '.join(map(str, roots))}); "
                'an "affinity": "any" mission needs a "workspace" every node sees, listed in each node\'s '
                "[security] workspace_roots")
    if not ws.is_dir():
        return f"its workspace {ws} is not there on node {node} (not shared with the node that accepted it)"
    return None


def mission_workspace(workspace: str, mission_file: str | os.PathLike[str]) -> Path:
    """A mission's ``workspace``, relative to its file's folder, with ``..`` and symlinks resolved."""
    return (Path(os.path.abspath(mission_file)).parent / workspace).resolve()


def policy_problems(spec: MissionSpec, cfg: Config, mission_file: str | os.PathLike[str]) -> list[Problem]:
    """Everything in ``spec`` that ``cfg``'s ``[security]`` refuses, each with its JSON path.

    ``mission_file`` is where the daemon reads the file from (for ``polpo submit``: its place in the missions
    folder), since a relative ``workspace`` is resolved against that folder.
    """
    sec = cfg.security
    problems: list[Problem] = []
    for i, t in enumerate(spec.team):
        problems += _team_problems(f"$.team[{i}]", t, cfg)
    if spec.workspace:
        ws = mission_workspace(spec.workspace, mission_file)
        roots = workspace_roots(cfg)
        if not any(ws.is_relative_to(r) for r in roots):
            problems.append(Problem("$.workspace", (
                f'"{spec.workspace}" resolves to {ws}, outside the folders mission workspaces may use '
                f'({", ".join(map(str, roots))}); add a folder to [security] workspace_roots in the config '
                "to allow it")))
    if not sec.command_checks:
        problems += [Problem(f"$.tasks[{i}].{where}", (
            f"{exp.type} checks from missions are disabled by [security] command_checks = false "
            "(use file_exists or llm_review checks)"))
            for i, task in enumerate(spec.tasks) for where, exp in _expectations(task)
            if exp.type in _COMMAND_CHECKS]
    return problems


def _expectations(task: TaskSpec) -> list[tuple[str, Any]]:
    """(JSON path below the task, expectation) of every expectation, those inside tiers included."""
    out: list[tuple[str, Any]] = [(f"expectations[{j}]", e) for j, e in enumerate(task.expectations)]
    for k, tier in enumerate(task.tiers or ()):
        out += [(f"tiers[{k}].expectations[{j}]", e) for j, e in enumerate(tier.expectations)]
    return out


def _team_problems(at: str, t: TeamAgent, cfg: Config) -> list[Problem]:
    sec = cfg.security
    problems: list[Problem] = []
    if (t.type == "command" or t.command is not None) and not sec.inline_agents:
        problems.append(Problem(f"{at}.command", (
            "inline command agents are disabled by [security] inline_agents = false; "
            "define the agent in the config")))
    if t.type == "command":
        return problems  # apiBase and apiKeyEnv mean nothing to a command agent
    if _override(t, cfg) is not None:
        return problems  # endpoint, key and model come from [agents.NAME]; the mission's are not used
    allowed = ", ".join(sec.team_key_envs) or "none are listed"
    if t.api_base:
        if not sec.inline_agents:
            problems.append(Problem(f"{at}.apiBase", (
                "inline endpoints are disabled by [security] inline_agents = false; set [defaults] api_base "
                f"or define [agents.{t.name}] in the config")))
        elif not t.api_key_env:
            problems.append(Problem(f"{at}.apiBase", (
                'a team agent with its own endpoint must name its own key in "apiKeyEnv" (one of [security] '
                f"team_key_envs: {allowed}): the config's keys are never sent to an endpoint the config does "
                "not name")))
    if t.api_key_env and t.api_key_env not in sec.team_key_envs:
        problems.append(Problem(f"{at}.apiKeyEnv", (
            f'"{t.api_key_env}" is not one of the variables team agents may use ([security] team_key_envs: '
            f"{allowed})")))
    return problems
