"""Daemon configuration: ``config/polpo.toml`` (+ a few ``POLPO_*`` overrides) → typed settings.

Relative paths resolve against the config file's folder, so the daemon behaves the same from any working
directory. Durations are seconds (a number) or ISO-8601 strings (``"PT30S"``).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from polpo.config_hints import keys_at
from polpo.config_paths import ConfigNotFound, config_path, read_toml, resolve_dirs
from polpo.config_retention import RetentionSettings
from polpo.config_tools import McpSettings, QuestionSettings
from polpo.durations import Duration
from polpo.origins import format_origin, parse_authority, parse_origin
from polpo.suggest import Suggester


def _hostname() -> str:
    import re

    # os.uname().nodename is socket.gethostname() on POSIX (polpo's platforms), without importing socket:
    # every command that reads the config calls this (start-up speed)
    return re.sub(r"[^A-Za-z0-9._-]+", "-", os.uname().nodename).strip("-") or "polpo"


def _secs(n: float) -> timedelta:
    return timedelta(seconds=n)


class ConfigError(Exception):
    """A config file that cannot be used; the message names the file and what to fix."""


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


DEFAULT_MAX_MISSION_BYTES = 4 * 1024 * 1024  # larger mission files are rejected unread


class DaemonSettings(_Base):
    missions_dir: Path = Path("missions")
    state_dir: Path = Path(".polpo")
    max_concurrency: int = Field(4, ge=1)
    shutdown_grace: Duration = Field(default_factory=lambda: _secs(10))
    force_polling: bool = False  # for network file systems where inotify events do not arrive
    max_mission_bytes: int = Field(DEFAULT_MAX_MISSION_BYTES, ge=1024, le=1024**3)  # larger mission files are rejected unread
    # this daemon's name among the daemons sharing a PostgreSQL store (stamped on its events); default: the hostname
    node: str = Field(default_factory=lambda: _hostname(), min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._-]+$")


class AgentConfig(_Base):
    type: Literal["command", "llm"]
    # command agents
    command: list[str] | None = None
    env: dict[str, str] = {}
    env_passthrough: list[str] = []  # variables it gets from the daemon's environment (besides [security]'s)
    inherit_env: bool = False  # true: the daemon's whole environment (keys included) instead of the minimal one
    # llm agents
    model: str | None = None
    api_base: str | None = None
    max_turns: int = Field(50, ge=1)
    temperature: float | None = None
    system_prompt: str | None = None
    api_key_env: str | None = None  # the variable holding the key; default: litellm's for the provider
    role: str | None = None  # a team agent's role, told to the model
    max_tokens: int = Field(4096, ge=16)  # the most tokens one model reply may generate (bounds runaway output)
    empty_reply_nudges: int = Field(2, ge=0, le=20)  # an empty reply is re-asked this often, then the attempt fails
    context_window: int | None = Field(None, ge=256)  # the model's context in tokens; None: litellm's, if it knows
    mcp: list[str] = []  # the [mcp.servers] whose tools it gets, as SERVER.TOOL
    approve_tools: list[str] = []  # tool calls that wait for a person's approval: "git.git_commit", "fs.*", "run_command"
    # both
    ask_human: bool = False  # it may ask a person: an LLM agent's ask_human tool; a command agent's output that asks
    timeout: Duration | None = None
    max_concurrency: int | None = Field(None, ge=1)
    ignore_files: list[str] | None = None  # its own state files (kept out of its changes); None: [defaults]'
    daily_usd: float | None = Field(None, gt=0)  # its LLM spend per UTC day; over it, its new work waits
    daily_tokens: int | None = Field(None, gt=0)


class Defaults(_Base):
    max_retries: int = Field(3, ge=0)
    max_fix_attempts: int = Field(2, ge=0)
    agent_timeout: Duration = Field(default_factory=lambda: _secs(1800))
    check_timeout: Duration = Field(default_factory=lambda: _secs(600))
    quality_threshold: float | None = Field(None, ge=1, le=5)
    model: str | None = None  # model of LLM agents that name none
    # endpoint and key of LLM agents that set neither (the two go together: an agent that sets one takes neither)
    api_base: str | None = None
    api_key_env: str | None = None
    # agents' own state files, never an attempt's changes nor committed (polpo.changes.patterns): aider's history,
    # tags cache and config (.aider*); Claude Code and Codex run as docs/how-to/coding-clis.md says write none into the workspace
    ignore_files: list[str] = [".aider*"]


class JudgeSettings(_Base):
    model: str | None = None
    models: list[str] = Field([], max_length=9)  # not default_factory=list: its signature costs ~6 ms of start-up
    seats: int = Field(3, ge=1, le=9)  # reviewers in the panel; 1: a single reviewer, no consensus
    max_turns: int = Field(20, ge=1, le=200)  # a reviewer's exploration turns (model calls) before it must write
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float | None = None
    max_tokens: int = Field(2048, ge=16)  # the most tokens one judge reply may generate (reviewers, judges)
    context_window: int | None = Field(None, ge=256)  # the judge models' context in tokens; None: litellm's
    correct_expectations: bool = True  # the expectation judge, on a task's first failure
    threshold_floor: float = Field(2.5, ge=1, le=5)  # it never lowers an llm_review threshold below this
    reviewer_timeout: Duration = Field(default_factory=lambda: _secs(900))  # one reviewer's whole run
    # a review the judge could not do (unreachable, 5xx, timeouts, auth) is retried, then the task waits
    outage_retries: int = Field(5, ge=0)
    outage_backoff: Duration = Field(default_factory=lambda: _secs(30))  # doubles after each try
    reviewer_error: Literal["abstain", "fail"] = "abstain"  # what a crashed reviewer's seat means
    uncertain_band: float = Field(0.25, ge=0, le=4)  # this close to the threshold: one more panel round
    calibration: Path | None = None  # {"scale", "bias"} from `polpo calibrate --write`, applied to raw scores
    cache: bool = False  # judge-call cache (SQLite in state_dir); samples > 1 never uses it
    cache_ttl: Duration = Field(default_factory=lambda: _secs(7 * 86400))
    diversity: bool = True  # seats after the first get their own angle, evidence order and sampling
    logprobs: bool = True  # score tokens' log-probabilities, for G-Eval's probability-weighted scores
    probes: bool = True  # the judge's own implementation (stated-example functions) and program (text answers)
    max_false_pass: float = Field(0.05, gt=0, lt=1)  # `polpo calibrate --write`'s rule: broken work passing
    max_false_fail: float = Field(0.2, gt=0, lt=1)  # … and good work failing without a person

    def panel_models(self) -> list[str]:
        """One model per seat: one ``model`` means every seat uses it; fewer ``models`` than seats are cycled."""
        names = list(self.models) or ([self.model] if self.model else [])
        return [names[i % len(names)] for i in range(self.seats)] if names else []


class LlmSettings(_Base):
    env_file: Path | None = None  # KEY=VALUE lines loaded into the environment at start (existing vars win)
    max_concurrency_per_model: int = Field(4, ge=1)
    max_retries: int = Field(3, ge=0)  # 429s, timeouts, 5xx, connection errors
    request_timeout: Duration = Field(default_factory=lambda: _secs(120))


class PriceSettings(_Base):
    """``[prices."model"]``: USD per million tokens, over litellm's map (0 for a local model is a price)."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class RateLimitSettings(_Base):
    """``[limits."model or api_base"]``: the provider's limits, kept for agents and judges together."""

    rpm: int | None = Field(None, ge=1)  # requests started per minute
    tpm: int | None = Field(None, ge=1)  # tokens per minute (prompt estimate + the reply's bound)


class BudgetSettings(_Base):
    """The daemon's LLM spend per UTC day (over it, new work waits for the next day) and when to warn."""

    daily_usd: float | None = Field(None, gt=0)
    daily_tokens: int | None = Field(None, gt=0)
    warn_at: float = Field(0.8, gt=0, le=1)  # budget:warning once an account reaches this fraction of a budget


class SlaSettings(_Base):
    check_interval: Duration = Field(default_factory=lambda: _secs(30))
    warning_threshold: float = Field(0.8, gt=0, le=1)
    violation_action: Literal["notify", "fail"] = "notify"
    warning_channels: list[str] = []
    violation_channels: list[str] = []


class SecuritySettings(_Base):
    """What a mission file may ask for beyond the config (see docs/explanation/security.md)."""

    inline_agents: bool = True  # false: a mission's team agent may not define a command or an api_base
    command_checks: bool = True  # false: a mission may not use test/script expectations
    team_key_envs: list[str] = []  # variables a team agent may name as its own apiKeyEnv
    workspace_roots: list[Path] = []  # besides <state_dir>/workspaces: folders mission workspaces may lie in
    env_passthrough: list[str] = []  # variables the config's command agents get from the daemon's environment


class StoreSettings(_Base):
    """Where state lives: SQLite in ``state_dir`` (the default) or a PostgreSQL database shared by nodes."""

    url: str | None = None  # postgresql://user@host:port/db; unset: <state_dir>/polpo.db
    password_env: str | None = None  # the variable holding the password (never in the URL, never logged)
    pool_size: int = Field(4, ge=1, le=100)  # connections per daemon: the writer plus concurrent reads
    # seconds without a heartbeat after which a node counts as dead and its tasks are taken over (PostgreSQL)
    lease: Duration = Field(default_factory=lambda: _secs(30))

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, v: str | None) -> str | None:
        # the messages never repeat the URL: it might hold the very password they are about
        if v is None:
            return None
        from urllib.parse import parse_qs, urlsplit

        try:
            parts = urlsplit(v)
            has_password = parts.password is not None or "password" in parse_qs(parts.query)
        except ValueError:
            raise ValueError("not a URL; expected postgresql://user@host:port/db") from None
        if parts.scheme not in ("postgresql", "postgres"):
            raise ValueError("only PostgreSQL is supported: postgresql://user@host:port/db "
                             "(leave url unset for SQLite in state_dir)")
        if has_password:
            raise ValueError("the URL holds a password; remove it and name the environment variable "
                             "that holds it in [store] password_env")
        return v


class HttpSettings(_Base):
    """The daemon's HTTP API, web view and ``/metrics``: off unless ``listen`` is set."""

    listen: str | None = None  # "127.0.0.1:8765", "[::1]:8765"; port 0 picks a free one
    token_env: str = "POLPO_HTTP_TOKEN"  # the variable holding the bearer token; when it is set, every call needs it
    # other names the API is reached by (a DNS name, a reverse proxy's): "polpo.example.com" (any port), "box.lan:8765"
    hosts: list[str] = []
    # web pages of other origins that may call the API (docs/explanation/security.md): "https://ops.example.com"
    allowed_origins: list[str] = []
    # bounds, so one client cannot exhaust the daemon (docs/reference/http-api.md)
    max_body: int = Field(16 * 1024 * 1024, ge=1024)  # bytes of a request body; larger ones get 413, unread
    header_timeout: Duration = Field(default_factory=lambda: _secs(10))  # a request's head must arrive within it
    body_timeout: Duration = Field(default_factory=lambda: _secs(30))  # and its body within this, after the head
    max_connections: int = Field(256, ge=1)  # connections served at once; a request on one more gets 503
    max_stream_clients: int = Field(100, ge=1)  # open /api/events/stream clients; one more gets 503

    @field_validator("listen")
    @classmethod
    def _host_port(cls, v: str | None) -> str | None:
        if v is None:
            return None
        host, sep, port = v.rpartition(":")
        if not sep or not host or not port.isdigit() or int(port) > 65535:
            raise ValueError('expected "HOST:PORT", e.g. "127.0.0.1:8765" (IPv6: "[::1]:8765")')
        return v

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, v: list[str]) -> list[str]:
        out = []
        for entry in v:
            auth = parse_authority(entry)
            if auth is None:
                raise ValueError(f'{entry!r}: expected a host name, optionally with a port: "polpo.example.com", '
                                 '"box.lan:8765", "[fd00::1]:8765" (no scheme, no path)')
            out.append(auth[0] if auth[1] is None else f"{auth[0]}:{auth[1]}")
        return out

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, v: list[str]) -> list[str]:
        out = []
        for entry in v:
            origin = parse_origin(entry)
            if origin is None:
                raise ValueError(f'{entry!r}: expected an origin, scheme://host[:port] with no path: '
                                 '"https://ops.example.com", "http://localhost:3000"')
            out.append(format_origin(origin))
        return out

    def host_port(self) -> tuple[str, int] | None:
        if self.listen is None:
            return None
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]"), int(port)


class Config(_Base):
    daemon: DaemonSettings = DaemonSettings()
    agents: dict[str, AgentConfig] = {}
    defaults: Defaults = Defaults()
    judge: JudgeSettings = JudgeSettings()
    llm: LlmSettings = LlmSettings()
    prices: dict[str, PriceSettings] = {}
    limits: dict[str, RateLimitSettings] = {}
    budget: BudgetSettings = BudgetSettings()
    sla: SlaSettings = SlaSettings()
    security: SecuritySettings = SecuritySettings()
    store: StoreSettings = StoreSettings()
    http: HttpSettings = HttpSettings()
    mcp: McpSettings = McpSettings()
    questions: QuestionSettings = QuestionSettings()
    retention: RetentionSettings = RetentionSettings()
    channels: dict[str, dict[str, Any]] = {}
    notify: dict[str, Any] = {}
    source: Path | None = None  # the file it was read from

    @property
    def state_dir(self) -> Path:
        return self.daemon.state_dir

    @property
    def missions_dir(self) -> Path:
        return self.daemon.missions_dir

    @property
    def db_path(self) -> Path:
        return self.daemon.state_dir / "polpo.db"

    @property
    def events_path(self) -> Path:
        return self.daemon.state_dir / "events.jsonl"


def load_config(explicit: str | os.PathLike[str] | None = None) -> Config:
    path = config_path(explicit)
    try:
        raw = read_toml(path)
    except ConfigNotFound as e:
        raise ConfigError(str(e)) from None
    return parse_config(raw, path)


def parse_config(raw: dict[str, Any], path: Path) -> Config:
    base = path.resolve().parent
    daemon = resolve_dirs(dict(raw.get("daemon", {})), base)
    raw = {**raw, "daemon": daemon, "source": str(path.resolve())}
    judge = raw.get("judge")
    if isinstance(judge, dict) and isinstance(judge.get("calibration"), str):
        raw["judge"] = {**judge, "calibration": str((base / judge["calibration"]).resolve())}
    retention = raw.get("retention")
    if isinstance(retention, dict) and isinstance(retention.get("export"), str):
        raw["retention"] = {**retention, "export": str((base / retention["export"]).resolve())}
    llm = raw.get("llm")
    if isinstance(llm, dict) and isinstance(llm.get("env_file"), str):
        raw["llm"] = {**llm, "env_file": str((base / llm["env_file"]).resolve())}
    security = raw.get("security")
    if isinstance(security, dict) and isinstance(security.get("workspace_roots"), list):
        roots = [str((base / r).resolve()) if isinstance(r, str) else r for r in security["workspace_roots"]]
        raw["security"] = {**security, "workspace_roots": roots}
    if os.environ.get("POLPO_JUDGE_MODEL"):
        raw["judge"] = {**raw.get("judge", {}), "model": os.environ["POLPO_JUDGE_MODEL"], "models": []}
    try:
        cfg = Config.model_validate(raw)
    except ValidationError as e:
        suggest = Suggester()
        lines = [f"{path}: {'.'.join(str(p) for p in err['loc'])}: "
                 + (f"unknown key{suggest(str(err['loc'][-1]), keys_at(Config, err['loc'][:-1]))}"
                    if err["type"] == "extra_forbidden" else err["msg"])
                 for err in e.errors()]
        raise ConfigError("\n".join(lines)) from None
    problems = [
        f"{path}: agents.{name}.command: a command agent needs command = [program, args…]"
        for name, a in cfg.agents.items() if a.type == "command" and not a.command
    ] + [
        f"{path}: agents.{name}.model: an LLM agent needs model = \"provider/model\" "
        f"(or set [defaults] model)"
        for name, a in cfg.agents.items() if a.type == "llm" and not (a.model or cfg.defaults.model)
    ]
    problems += [f"{path}: security.team_key_envs: {name} is the key of {owner}; a mission's own endpoint "
                 f"must never receive it (list a variable only missions use)"
                 for owner, name in _configured_keys(cfg) if name in cfg.security.team_key_envs]
    problems += [f"{path}: {p}" for p in _tool_problems(cfg)]
    if len(cfg.judge.models) > cfg.judge.seats:
        problems.append(f"{path}: judge.models: {len(cfg.judge.models)} models for {cfg.judge.seats} seat(s); "
                        f"list at most one per seat, or raise judge.seats")
    if cfg.llm.env_file is not None and not cfg.llm.env_file.is_file():
        problems.append(f"{path}: llm.env_file: {cfg.llm.env_file} does not exist")
    if cfg.judge.calibration is not None:
        from polpo.review.calibration import load_calibration

        try:
            load_calibration(cfg.judge.calibration)
        except ValueError as e:
            problems.append(f"{path}: judge.calibration: {e}")
    if problems:
        raise ConfigError("\n".join(problems))
    return cfg


def _tool_problems(cfg: Config) -> list[str]:
    """What agents' ``mcp`` and ``approve_tools`` name that does not exist (polpo.config_tools)."""
    suggest, servers, out = Suggester(), sorted(cfg.mcp.servers), []
    for name, a in cfg.agents.items():
        if a.type == "command" and (a.mcp or a.approve_tools):
            out.append(f"agents.{name}: mcp and approve_tools are for LLM agents (a command agent runs its own "
                       "program)")
            continue
        for server in a.mcp:
            if server not in cfg.mcp.servers:
                out.append(f"agents.{name}.mcp: no [mcp.servers.{server}]{suggest(server, servers)}")
        for pattern in a.approve_tools:
            server, dot, _ = pattern.partition(".")
            if dot and server not in a.mcp:
                out.append(f"agents.{name}.approve_tools: {pattern!r} names server {server!r}, which its mcp list "
                           f"does not have ({', '.join(a.mcp) or 'none'})")
    return out


def _configured_keys(cfg: Config) -> list[tuple[str, str]]:
    """(where, variable) for every API key variable the config names."""
    keys = [(f"agents.{n}", a.api_key_env) for n, a in cfg.agents.items()]
    keys += [("defaults", cfg.defaults.api_key_env), ("judge", cfg.judge.api_key_env)]
    return [(owner, name) for owner, name in keys if name]
