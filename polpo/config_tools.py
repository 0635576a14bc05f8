"""The config of what agents reach beyond their workspace: MCP servers (``[mcp.servers.NAME]``) and people
(``[questions]``: the answers agents wait for, and the tool calls that wait for a person's approval).

Its own module so :mod:`polpo.mcp` reads the servers' settings without the whole config, and the config stays one
screen per topic. Values may name the daemon's environment variables as ``${NAME}`` (``$$`` is a ``$``): a
server gets an operator's key only where the config writes it so (:func:`expand`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from polpo.durations import Duration

__all__ = ["SERVER_NAME", "McpServerSettings", "McpSettings", "MissingVariable", "QuestionSettings", "expand",
           "variables"]

SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
"""A server's name: the namespace of its tools (``git.git_status``), so no dot, and short (a model's tool names
are at most 64 characters)."""
_VAR = re.compile(r"\$(\$|\{([A-Za-z_][A-Za-z0-9_]*)\})")


class MissingVariable(Exception):
    """A ``${NAME}`` whose variable is not set in the daemon's environment."""


def variables(text: str) -> list[str]:
    """The ``${NAME}`` variables ``text`` names, in order."""
    return [m.group(2) for m in _VAR.finditer(text) if m.group(2)]


def expand(text: str, env: Mapping[str, str] | None = None) -> str:
    """``text`` with each ``${NAME}`` replaced by the variable's value (``$$`` by ``$``); :class:`MissingVariable`
    names the first variable that is not set."""
    source = os.environ if env is None else env

    def one(m: re.Match[str]) -> str:
        name = m.group(2)
        if name is None:
            return "$"
        if name not in source:
            raise MissingVariable(name)
        return source[name]

    return _VAR.sub(one, text)


def _secs(n: float) -> timedelta:
    return timedelta(seconds=n)


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def _checked_refs(values: Mapping[str, str]) -> Mapping[str, str]:
    for key, value in values.items():
        stray = _VAR.sub("", value)
        if "$" in stray:
            raise ValueError(f"{key}: a $ must start ${{NAME}} (a variable of the daemon's environment) or be "
                             "written $$")
    return values


class McpServerSettings(_Base):
    """``[mcp.servers.NAME]``: one MCP server, started with ``command`` (stdio) or reached at ``url`` (streamable
    HTTP). An LLM agent uses it when its ``mcp`` list names it; its tools are ``NAME.TOOL``."""

    # stdio: the program, run in the task's workspace (``cwd`` relative to it) with the minimal environment
    command: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}  # its variables beyond the minimal environment; "${NAME}" takes the daemon's
    cwd: str | None = None  # relative to the task's workspace (default: the workspace itself)
    # one process per agent for all its tasks, in a folder of its own (<state_dir>/mcp/AGENT/NAME), instead of
    # one per attempt in the task's workspace
    shared: bool = False
    # streamable HTTP
    url: str | None = None
    headers: dict[str, str] = {}  # e.g. Authorization = "Bearer ${GITHUB_TOKEN}"
    # both
    timeout: Duration = Field(default_factory=lambda: _secs(60))  # one tool call; past it the server is restarted
    start_timeout: Duration = Field(default_factory=lambda: _secs(30))  # start, handshake and the tool list
    allow: list[str] = []  # the tools offered (names or globs: "git_*"); empty: all of them
    deny: list[str] = []  # tools never offered, whatever allow says

    @field_validator("env", "headers")
    @classmethod
    def _refs(cls, v: dict[str, str]) -> dict[str, str]:
        return dict(_checked_refs(v))

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError('give either command = "program" (a stdio server) or url = "https://…" '
                             "(a streamable HTTP server)")
        if self.url is not None:
            given = [k for k in ("args", "env", "cwd", "shared") if k in self.model_fields_set]
            if given:
                raise ValueError(f"{', '.join(given)}: only for a stdio server (command); an HTTP server takes "
                                 "url and headers")
            if not self.url.startswith(("http://", "https://")):
                raise ValueError(f"url {self.url!r}: expected http:// or https://")
        elif self.headers:
            raise ValueError("headers: only for an HTTP server (url); a stdio server takes env")
        if self.cwd is not None and self.shared:
            raise ValueError("cwd: a shared server serves every task, so it runs in a folder of its own "
                             "(<state_dir>/mcp/AGENT/NAME), not in a task's workspace; pass paths in its args")
        if self.cwd is not None and (os.path.isabs(self.cwd) or ".." in self.cwd.replace("\\", "/").split("/")):
            raise ValueError(f"cwd {self.cwd!r}: a folder inside the task's workspace (relative, no '..')")
        return self


class McpSettings(_Base):
    servers: dict[str, McpServerSettings] = {}

    @field_validator("servers")
    @classmethod
    def _names(cls, v: dict[str, McpServerSettings]) -> dict[str, McpServerSettings]:
        for name in v:
            if not SERVER_NAME.match(name):
                raise ValueError(f"{name!r}: a server's name is 1-32 letters, digits, '-' or '_' (it prefixes its "
                                 "tools' names: NAME.TOOL)")
        return v


class QuestionSettings(_Base):
    """``[questions]``: what an agent's question (``ask_human``, a command agent's output that asks) and a tool
    call awaiting approval (``approve_tools``) wait for, and what happens when nobody answers in time."""

    timeout: Duration = Field(default_factory=lambda: _secs(3600))  # a question waits this long for a person
    # then: a model answers it (Polpo's behaviour), the agent goes on with a note saying nobody answered, or the
    # task fails
    on_timeout: Literal["answer", "continue", "fail"] = "answer"
    model: str | None = None  # the model that answers (and classifies output); default: [judge]'s, then [defaults]'
    api_base: str | None = None
    api_key_env: str | None = None
    max_per_task: int = Field(2, ge=0, le=20)  # questions one task may ask (Polpo's maxQuestionRounds)
    classify: bool = True  # a command agent's output that looks like a question is confirmed by the model first
    approval_timeout: Duration = Field(default_factory=lambda: _secs(3600))  # a tool call waits this long
    on_approval_timeout: Literal["refuse", "approve", "fail"] = "refuse"  # refuse: the model is told, and goes on
