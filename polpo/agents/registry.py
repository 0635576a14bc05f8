"""Which agent runs a task: config agents, overridden per mission by the mission's ``team``.

A team agent is built from the mission's fields, but what it may reach is the config's: an LLM team agent's
model, endpoint and key follow :func:`polpo.mission.security.team_endpoint` (``[agents.NAME]`` of the same name,
then the mission, then ``[defaults]``), and a command team agent gets the minimal environment only (never
``inherit_env`` nor ``env_passthrough``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from polpo import __version__
from polpo.agents.base import Agent, AgentRequest, AgentResult
from polpo.agents.client_setup import client_from_config
from polpo.agents.command import CommandAgent
from polpo.clock import Clock
from polpo.config import AgentConfig, Config
from polpo.llm.client import LLMClient, ModelSettings
from polpo.mcp.pool import McpAgent, McpPool
from polpo.mission.schema import MissionSpec, TeamAgent
from polpo.mission.security import config_endpoint, team_endpoint


@dataclass(frozen=True)
class AgentSlot:
    """A resolved agent plus the limits the dispatcher needs."""

    agent: Agent
    limit_key: str  # concurrency is counted per key: config agents by name, team agents per mission
    max_concurrency: int | None
    timeout: float | None
    kind: str
    model: str | None = None  # LLM agents: the model they run on
    ignore_files: tuple[str, ...] = ()  # its own state files: never its changes, never committed
    isolation: str | None = None  # "worktree" for a team agent with enableGit: its tasks' default
    asks: bool = False  # it may ask a person (ask_human): a command agent's output that asks waits for an answer


class UnavailableAgent:
    """Stands in for an agent type this build cannot run; every attempt fails with the reason."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason

    async def run(self, request: AgentRequest, *, on_start: object = None) -> AgentResult:
        return AgentResult(exit_code=None, signal=None, timed_out=False, stdout_tail="", stderr_tail="",
                           stdout_bytes=0, stderr_bytes=0, duration=0.0, error=self.reason)


def _secs(d: timedelta | None) -> float | None:
    return d.total_seconds() if d is not None else None


class AgentFactory:
    def __init__(self, cfg: Config, clock: Clock, llm: LLMClient | None = None,
                 extra: Mapping[str, Agent] | None = None) -> None:
        """``extra``: agents built by the caller (an embedding program, a test), available by name like
        configured ones, with the default timeout."""
        self.cfg = cfg
        self.clock = clock
        self.llm = llm or client_from_config(cfg)
        self.mcp = McpPool(cfg.mcp.servers, cfg.state_dir, version=__version__)  # the daemon's MCP servers
        self._config_agents: dict[str, AgentSlot] = {
            name: self._build(name, a, limit_key=name) for name, a in cfg.agents.items()
        }
        for name, agent in (extra or {}).items():
            self._config_agents[name] = AgentSlot(agent, name, None, _secs(cfg.defaults.agent_timeout), "custom",
                                                  ignore_files=tuple(cfg.defaults.ignore_files))

    def known_names(self) -> list[str]:
        return sorted(self._config_agents)

    def default_agent(self, spec: MissionSpec) -> str | None:
        """The agent of tasks without ``assignTo``: the only one available to the mission, if there is one."""
        names = {a.name for a in spec.team} | set(self._config_agents)
        return next(iter(names)) if len(names) == 1 else None

    def is_llm(self, mission_id: str, spec: MissionSpec, name: str) -> bool:
        return self.resolve(mission_id, spec, name).kind == "llm"

    def resolve(self, mission_id: str, spec: MissionSpec, name: str) -> AgentSlot:
        for team_agent in spec.team:
            if team_agent.name == name:
                return self._build_team(mission_id, team_agent)
        if name in self._config_agents:
            return self._config_agents[name]
        return AgentSlot(UnavailableAgent(name, f"no agent named {name!r} is configured"),
                         f"missing:{name}", None, None, "missing")

    def _build(self, name: str, a: AgentConfig, *, limit_key: str, team: bool = False,
               isolation: str | None = None) -> AgentSlot:
        timeout = _secs(a.timeout) or _secs(self.cfg.defaults.agent_timeout)
        extras: dict[str, Any] = {"isolation": isolation, "asks": a.ask_human, "ignore_files": tuple(
            a.ignore_files if a.ignore_files is not None else self.cfg.defaults.ignore_files)}
        # a mission's own command agent gets the minimal environment only: passthrough is for the config's agents
        passthrough = () if team else (*self.cfg.security.env_passthrough, *a.env_passthrough)
        agent: Agent
        if a.type == "command":
            assert a.command is not None
            agent = CommandAgent(name, a.command, clock=self.clock, default_timeout=timeout, env=a.env,
                                 inherit_env=a.inherit_env, passthrough=passthrough,
                                 outcomes_dir=os.fspath(self.cfg.state_dir / "outcomes"))
        else:
            from polpo.agents.llm import LLMAgent  # lazy: command-only daemons never load the tool loop

            endpoint = config_endpoint(a, self.cfg)
            model = endpoint.model
            if not model:
                return AgentSlot(UnavailableAgent(name, f"LLM agent {name!r} has no model; set its model or "
                                                        f"[defaults] model in the config"),
                                 limit_key, a.max_concurrency, timeout, a.type, **extras)
            settings = ModelSettings(model=model, api_base=endpoint.api_base, api_key_env=endpoint.api_key_env,
                                     temperature=a.temperature, max_tokens=a.max_tokens,
                                     context_window=a.context_window,
                                     timeout=self.cfg.llm.request_timeout.total_seconds())
            from polpo.agents.toolbox import base_tools

            servers = McpAgent(name, a.mcp, self.mcp, taken=base_tools(a.ask_human).names) if a.mcp else None
            agent = LLMAgent(name, settings, client=self.llm, clock=self.clock, max_turns=a.max_turns,
                             system_prompt=a.system_prompt, default_timeout=timeout, role=a.role,
                             empty_reply_nudges=a.empty_reply_nudges, mcp=servers, approve_tools=a.approve_tools,
                             ask_human=a.ask_human)
            return AgentSlot(agent, limit_key, a.max_concurrency, timeout, a.type, model, **extras)
        return AgentSlot(agent, limit_key, a.max_concurrency, timeout, a.type, **extras)

    def _build_team(self, mission_id: str, t: TeamAgent) -> AgentSlot:
        kind = t.type or "llm"
        base = self.cfg.agents.get(t.name)
        fallback = base if base is not None and base.type == kind else None
        endpoint = team_endpoint(t, self.cfg)

        def pick(mine: Any, field: str) -> Any:
            """The mission's value, else the same-named config agent's."""
            return mine if mine is not None or fallback is None else getattr(fallback, field)

        cfg = AgentConfig(type=kind, command=t.command, env=t.env, inherit_env=False,
                          model=endpoint.model, api_base=endpoint.api_base, api_key_env=endpoint.api_key_env,
                          timeout=pick(t.timeout, "timeout"),
                          max_concurrency=pick(t.max_concurrency, "max_concurrency"),
                          system_prompt=pick(t.system_prompt, "system_prompt"),
                          temperature=pick(t.temperature, "temperature"),
                          max_turns=pick(t.max_turns, "max_turns") or 50, role=pick(t.role, "role"),
                          ignore_files=pick(t.ignore_files, "ignore_files"),
                          # the mission file has no keys for these: the same-named config agent's, else defaults
                          **({"max_tokens": fallback.max_tokens, "empty_reply_nudges": fallback.empty_reply_nudges,
                              "context_window": fallback.context_window} if fallback is not None else {}))
        return self._build(t.name, cfg, limit_key=f"{mission_id}/{t.name}", team=True,
                           isolation="worktree" if t.enable_git else None)
