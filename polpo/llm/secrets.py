"""Secrets stay out of logs, events and stored traces.

Keys are read only from the environment (optionally filled from an env-file the config names). Anything
that may carry provider text (error messages, transcripts) goes through :func:`redact`, which replaces
every value of a secret-looking environment variable with ``***``; URLs with tokens go through
:func:`redact_url`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["load_env_file", "mask", "redact", "redact_url", "scrubbed_env", "secret_values"]

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)($|_)", re.IGNORECASE)
_MIN_LEN = 6  # shorter values would redact ordinary words


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


_names_cache: tuple[int, tuple[str, ...]] | None = None


def _secret_names() -> tuple[str, ...]:
    """Names of the secret-looking variables of the process environment.

    Matching every variable's name on every redaction was a measurable share of the daemon's time per task,
    so the names are kept until the set of variable names changes (a C-speed hash of the raw keys tells).
    Values are read on each call, so a changed value is never missed.
    """
    global _names_cache
    raw = getattr(os.environ, "_data", None)  # CPython's bytes-keyed dict behind os.environ
    key = hash(tuple(raw) if raw is not None else tuple(os.environ))
    if _names_cache is None or _names_cache[0] != key:
        _names_cache = (key, tuple(k for k in os.environ if is_secret_name(k)))
    return _names_cache[1]


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking variables, longest first (so a key that contains another is replaced whole)."""
    if env is None:
        vals = {v for k in _secret_names() if len(v := os.environ.get(k, "")) >= _MIN_LEN}
    else:
        vals = {v for k, v in env.items() if is_secret_name(k) and len(v) >= _MIN_LEN}
    return sorted(vals, key=len, reverse=True)


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with every secret value (and ``extra`` strings) replaced by ``***``."""
    if not extra and len(text) < _MIN_LEN:  # shorter than any secret value (or bearer token): nothing to mask
        return text
    return mask(text, [*secret_values(), *extra])


def mask(text: str, values: Iterable[str]) -> str:
    """``text`` with each of ``values`` and every bearer token / ``api_key=`` value replaced by ``***``."""
    for value in values:
        if value and value in text:
            text = text.replace(value, "***")
    if len(text) < _BEARER_MIN:
        return text
    low = text.lower()  # a cheap test first: the pattern's scan is the costly part of masking (150 µs on an 8 KB
    # prompt; "api" alone, in "APIs" or "capital", was enough to run it): only the words it needs can match
    return _BEARER.sub(r"\1***", text) if "bearer" in low or any(w in low for w in _API_KEY_WORDS) else text


_BEARER = re.compile(r"((?:Bearer|api[_-]?key[=:]\s*)\s*)[A-Za-z0-9._\-]{12,}", re.IGNORECASE)
_BEARER_MIN = len("bearer") + 12  # shorter text cannot hold a match: skip the scan
_API_KEY_WORDS = ("apikey", "api_key", "api-key")  # the pattern's ``api[_-]?key``
_TOKEN_PARAM = re.compile(r"(token|key|secret|sig|signature|password|auth|code)", re.IGNORECASE)


def redact_url(url: str) -> str:
    """A URL safe to show: no user:password, token-like query values masked, long path secrets masked.

    Slack and Discord style hooks carry their token in the path (``/services/T…/B…/XYZ``); every path
    segment of 16+ characters that mixes letters and digits is masked.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "***"
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    query = urlencode([(k, "***" if _TOKEN_PARAM.search(k) else v) for k, v in parse_qsl(parts.query)])
    segments = ["***" if _looks_secret(s) else s for s in parts.path.split("/")]
    return urlunsplit((parts.scheme, netloc, "/".join(segments), query, ""))


def _looks_secret(segment: str) -> bool:
    return len(segment) >= 16 and any(c.isdigit() for c in segment) and any(c.isalpha() for c in segment)


def scrubbed_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` without secret-looking variables: what a child process the daemon starts may see."""
    env = os.environ if env is None else env
    return {k: v for k, v in env.items() if not is_secret_name(k)}


def load_env_file(path: Path) -> list[str]:
    """Read ``KEY=VALUE`` lines into the environment (existing variables win); returns the names set.

    Blank lines and ``#`` comments are skipped; ``export KEY=VALUE`` and quoted values are accepted.
    """
    names: list[str] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ValueError(f"{path}: cannot read line {raw!r} (expected KEY=VALUE)")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if key not in os.environ:
            os.environ[key] = value
            names.append(key)
    return names
