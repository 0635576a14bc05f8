"""Where a config file puts things — the state folder, the missions folder, the store — read without validating
the whole config, so the CLI's quick commands (status, show, tail) answer without loading pydantic.

:func:`polpo.config.parse_config` resolves the folders with the same function, so both always agree.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = ["DEFAULT_CONFIG", "ConfigNotFound", "Located", "StoreAddress", "StoreSettingsLike", "Where", "config_path",
           "locate", "resolve_dirs"]

DEFAULT_CONFIG = Path("config/polpo.toml")


class ConfigNotFound(Exception):
    """The config file is missing or is not TOML; the message names the file and what to do."""


def config_path(explicit: str | os.PathLike[str] | None) -> Path:
    if explicit:
        return Path(explicit)
    env = os.environ.get("POLPO_CONFIG")
    return Path(env) if env else DEFAULT_CONFIG


def read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigNotFound(f"{path}: config file not found; pass --config PATH or set POLPO_CONFIG "
                             f"(the repository ships config/polpo.toml)") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigNotFound(f"{path}: not valid TOML: {e}") from None


def resolve_dirs(daemon: dict[str, Any], base: Path) -> dict[str, Any]:
    """``[daemon]`` with ``state_dir`` / ``missions_dir`` absolute: POLPO_STATE_DIR / POLPO_MISSIONS_DIR win,
    relative paths are against the config's folder, and the defaults are ``.polpo`` and ``missions`` there."""
    out = dict(daemon)
    for key, env_name, default in (("state_dir", "POLPO_STATE_DIR", ".polpo"),
                                   ("missions_dir", "POLPO_MISSIONS_DIR", "missions")):
        value = os.environ.get(env_name) or out.get(key, default)
        out[key] = str((base / value).resolve()) if isinstance(value, str) else value
    return out


class StoreSettingsLike(Protocol):
    """What connecting to a store needs (``[store]`` as validated, or as :func:`locate` reads it)."""

    @property
    def url(self) -> str | None: ...

    @property
    def password_env(self) -> str | None: ...

    @property
    def pool_size(self) -> int: ...


class Located(Protocol):
    """The part of a config the CLI's readers need (a full ``Config`` or a :class:`Where`)."""

    @property
    def state_dir(self) -> Path: ...

    @property
    def db_path(self) -> Path: ...

    @property
    def store(self) -> StoreSettingsLike: ...


@dataclass(frozen=True)
class StoreAddress:
    url: str | None = None
    password_env: str | None = None
    pool_size: int = 4
    lease: float = 30.0  # seconds (``[store] lease``); `polpo status` calls a node down after it


@dataclass(frozen=True)
class Where:
    """The paths and the store a config names."""

    source: Path
    state_dir: Path
    missions_dir: Path
    store: StoreAddress = field(default_factory=StoreAddress)

    @property
    def db_path(self) -> Path:
        return self.state_dir / "polpo.db"

    @property
    def events_path(self) -> Path:
        return self.state_dir / "events.jsonl"


def locate(explicit: str | os.PathLike[str] | None = None) -> Where:
    path = config_path(explicit)
    raw = read_toml(path)
    daemon: dict[str, Any] = raw["daemon"] if isinstance(raw.get("daemon"), dict) else {}
    dirs = resolve_dirs(daemon, path.resolve().parent)
    store: dict[str, Any] = raw["store"] if isinstance(raw.get("store"), dict) else {}
    return Where(source=path.resolve(), state_dir=Path(dirs["state_dir"]), missions_dir=Path(dirs["missions_dir"]),
                 store=StoreAddress(url=store.get("url"), password_env=store.get("password_env"),
                                    pool_size=int(store.get("pool_size", 4)),
                                    lease=_seconds(store.get("lease", 30.0))))


def _seconds(v: Any) -> float:
    """A duration as the config writes it (seconds or ISO 8601); the daemon validates it, this only reads it."""
    if isinstance(v, int | float):
        return float(v)
    from polpo.durations import parse_iso_duration

    try:
        return parse_iso_duration(str(v)).total_seconds()
    except ValueError:
        return 30.0
