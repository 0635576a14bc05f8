"""Notification channels and rules, typed from the raw ``[channels.NAME]`` / ``[notify]`` TOML tables.

.. code-block:: toml

    [channels.team-slack]
    type = "slack"
    url = "${SLACK_WEBHOOK_URL}"          # ${VAR} in url, headers and env is read from the environment

    [channels.ops]
    type = "webhook"
    url = "https://ops.example.com/hooks/polpo"
    headers = { Authorization = "Bearer ${OPS_TOKEN}" }
    timeout = 10                           # seconds per attempt (or "PT10S")
    retries = 3                            # extra attempts on connection errors, timeouts, 429 and 5xx
    backoff = 0.5                          # seconds before the first retry, doubled each time

    [channels.audit]
    type = "file"
    path = "notifications.jsonl"          # relative to the config file's folder

    [channels.pager]
    type = "command"
    argv = ["./page.sh", "--urgent"]       # gets the event JSON on stdin
    timeout = 30

    [[notify.rules]]
    events = ["sla:*", "quality:gate:failed"]
    channels = ["team-slack", "audit"]

Every error names the key to fix (``channels.ops.url: …``). Channel names used elsewhere (rules, the SLA
settings, a gate's ``notifyChannels``) are checked with :meth:`NotifyConfig.validate`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from polpo.config import Config, ConfigError
from polpo.durations import Duration
from polpo.events.catalog import ALL_EVENTS
from polpo.events.names import matches

__all__ = [
    "ChannelConfig", "CommandChannel", "FileChannel", "NotifyConfig", "NotifyConfigError", "NotifyRule",
    "SlackChannel", "WebhookChannel", "notify_config", "parse_notify",
]


class NotifyConfigError(ConfigError):
    """Channels or rules that cannot be used; one line per problem, each naming the key."""


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _secs(n: float) -> timedelta:
    return timedelta(seconds=n)


def _http_url(v: str) -> str:
    if not re.match(r"https?://[^/\s]+", v):
        raise ValueError("must be an http:// or https:// URL")
    return v


class _HttpChannel(_Base):
    url: str
    timeout: Duration = Field(default_factory=lambda: _secs(10))
    retries: int = Field(3, ge=0, le=10)
    backoff: Duration = Field(default_factory=lambda: _secs(0.5))
    backoff_max: Duration = Field(default_factory=lambda: _secs(30))

    @field_validator("url")
    @classmethod
    def _check_url(cls, v: str) -> str:
        return _http_url(v)


class WebhookChannel(_HttpChannel):
    """POST of the event as JSON (``{seq, ts, event, missionId?, taskId?, data, summary}``)."""

    type: Literal["webhook"]
    headers: dict[str, str] = {}


class SlackChannel(_HttpChannel):
    """A Slack incoming webhook: ``{"text": "<one-line summary>"}``."""

    type: Literal["slack"]


class FileChannel(_Base):
    """One JSON line per event, appended."""

    type: Literal["file"]
    path: Path


class CommandChannel(_Base):
    """A program run per event with the event JSON on stdin; a non-zero exit or a timeout is a failure.

    It sees a minimal environment (PATH, HOME, …; no API keys) plus ``env``, and ``POLPO_EVENT``.
    """

    type: Literal["command"]
    argv: list[str] = Field(min_length=1)
    timeout: Duration = Field(default_factory=lambda: _secs(30))
    env: dict[str, str] = {}
    cwd: Path | None = None  # default: the config file's folder


ChannelConfig = Annotated[WebhookChannel | SlackChannel | FileChannel | CommandChannel,
                          Field(discriminator="type")]


class NotifyRule(_Base):
    events: list[str] = Field(min_length=1)  # globs: "sla:*", "quality:**", "*"
    channels: list[str] = Field(min_length=1)


class NotifySettings(_Base):
    rules: list[NotifyRule] = []
    queue_size: int = Field(1000, ge=1)  # per channel; beyond it new notifications are dropped and reported
    digest: Duration | None = None  # how often attention:digest lists what waits for a person (None: never)


@dataclass(frozen=True)
class NotifyConfig:
    """Typed channels by name, the routing rules, and the per-channel queue bound."""

    channels: Mapping[str, ChannelConfig] = field(default_factory=dict)
    rules: Sequence[NotifyRule] = ()
    queue_size: int = 1000
    digest: timedelta | None = None  # how often attention:digest lists what waits for a person

    def unknown(self, names: Iterable[str]) -> list[str]:
        return [n for n in dict.fromkeys(names) if n not in self.channels]

    def validate(self, names: Iterable[str], where: str = "notifyChannels") -> None:
        """Raise :class:`NotifyConfigError` if ``names`` (at ``where``, e.g. a gate) include unknown channels."""
        bad = self.unknown(names)
        if bad:
            raise NotifyConfigError(_unknown_msg(where, bad, self.channels))


def _unknown_msg(where: str, bad: list[str], channels: Mapping[str, object]) -> str:
    known = ", ".join(sorted(channels)) or "none configured; add [channels.NAME] tables"
    return f"{where}: unknown notification channel(s) {', '.join(bad)} (known: {known})"


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_EXPANDED = frozenset({"url", "headers", "env"})
_CHANNELS: TypeAdapter[dict[str, ChannelConfig]] = TypeAdapter(dict[str, ChannelConfig])


def parse_notify(channels: Mapping[str, Any], notify: Mapping[str, Any], *, base: Path | None = None,
                 env: Mapping[str, str] | None = None, prefix: str = "") -> NotifyConfig:
    """Type, resolve and cross-check the raw tables; every problem is reported at once.

    ``base`` resolves relative ``file`` paths and command ``cwd`` (the config file's folder). ``${VAR}`` in a
    ``url``, a ``headers`` value or a command's ``env`` value is replaced from ``env`` (default ``os.environ``;
    a missing variable is an error), so tokens need not sit in the config file; ``argv`` is left as written.
    ``prefix`` (e.g. ``"config/polpo.toml: "``) starts every error line.
    """
    env = os.environ if env is None else env
    problems: list[str] = []
    expanded = {name: {k: _expand(v, env, f"channels.{name}.{k}", problems) if k in _EXPANDED else v
                       for k, v in raw.items()} if isinstance(raw, Mapping) else raw
                for name, raw in channels.items()}
    typed: dict[str, ChannelConfig] = {}
    try:
        typed = _CHANNELS.validate_python(expanded)
    except ValidationError as e:
        problems.extend(_errors(e, "channels"))
    settings = NotifySettings()
    try:
        settings = NotifySettings.model_validate(notify)
    except ValidationError as e:
        problems.extend(_errors(e, "notify"))
    for i, rule in enumerate(settings.rules):
        where = f"notify.rules[{i}]"
        if bad := [n for n in dict.fromkeys(rule.channels) if n not in channels]:
            problems.append(_unknown_msg(f"{where}.channels", bad, channels))
        for p in rule.events:
            hits = [ev for ev in ALL_EVENTS if matches(ev, p)]
            if not hits:
                problems.append(f"{where}.events: {p!r} matches no polpo event (names are listed in "
                                "polpo/events/catalog.py)")
            elif all(ev.startswith("notification:") for ev in hits):
                problems.append(f"{where}.events: {p!r}: notification:* events report deliveries and are never "
                                "routed (that could loop)")
    if problems:
        raise NotifyConfigError("\n".join(prefix + p for p in problems))
    if base is not None:
        typed = {name: _resolve(ch, base) for name, ch in typed.items()}
    return NotifyConfig(channels=typed, rules=settings.rules, queue_size=settings.queue_size, digest=settings.digest)


def notify_config(cfg: Config, env: Mapping[str, str] | None = None) -> NotifyConfig:
    """The daemon's notification config, with ``[sla] warning_channels``/``violation_channels`` checked too."""
    prefix = f"{cfg.source}: " if cfg.source else ""
    base = cfg.source.parent if cfg.source else None
    nc = parse_notify(cfg.channels, cfg.notify, base=base, env=env, prefix=prefix)
    problems = [prefix + _unknown_msg(f"sla.{key}", bad, nc.channels)
                for key in ("warning_channels", "violation_channels")
                if (bad := nc.unknown(getattr(cfg.sla, key)))]
    if problems:
        raise NotifyConfigError("\n".join(problems))
    return nc


def _expand(value: Any, env: Mapping[str, str], where: str, problems: list[str]) -> Any:
    if isinstance(value, str):
        def sub(m: re.Match[str]) -> str:
            if m.group(1) not in env:
                problems.append(f"{where}: environment variable {m.group(1)} is not set")
                return ""
            return env[m.group(1)]
        return _ENV_REF.sub(sub, value)
    if isinstance(value, dict):
        return {k: _expand(v, env, f"{where}.{k}", problems) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, env, f"{where}[{i}]", problems) for i, v in enumerate(value)]
    return value


def _errors(e: ValidationError, root: str) -> list[str]:
    out = []
    for err in e.errors():
        loc = [str(p) for p in err["loc"]]
        # drop the discriminator tag pydantic inserts after the channel name ("channels.x.webhook.url")
        if root == "channels" and len(loc) >= 2 and loc[1] in ("webhook", "slack", "file", "command"):
            del loc[1]
        msg = err["msg"]
        if err["type"] == "union_tag_invalid":
            msg = "type must be one of webhook, slack, file, command"
        elif err["type"] == "union_tag_not_found":
            msg = 'missing type = "webhook" | "slack" | "file" | "command"'
        out.append(f"{'.'.join([root, *loc])}: {msg}")
    return out


def _resolve(ch: ChannelConfig, base: Path) -> ChannelConfig:
    if isinstance(ch, FileChannel) and not ch.path.is_absolute():
        return ch.model_copy(update={"path": base / ch.path})
    if isinstance(ch, CommandChannel):
        cwd = base if ch.cwd is None else (ch.cwd if ch.cwd.is_absolute() else base / ch.cwd)
        return ch.model_copy(update={"cwd": cwd})  # a relative argv[0] ("./page.sh") is found from cwd
    return ch
