"""Host names and web origins, parsed and written the way browsers send them (``Host: name:port``,
``Origin: scheme://name[:port]``, lowercase, no default port).

One module for the config's ``[http] hosts`` / ``allowed_origins`` checks and the API's request guard, so an
entry is read exactly as a header is compared with it. Standard library only: the config imports it.
"""

from __future__ import annotations

import re

__all__ = ["DEFAULT_PORTS", "Authority", "Origin", "format_origin", "parse_authority", "parse_origin"]

DEFAULT_PORTS = {"http": 80, "https": 443}
_AUTHORITY = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9._-]+)(?::([0-9]{1,5}))?")

Authority = tuple[str, int | None]  # ("example.com", 8765), ("[::1]", None): the port when one is written
Origin = tuple[str, str, int]  # ("https", "example.com", 443): the port always filled in


def parse_authority(text: str) -> Authority | None:
    """``"Example.com:8765"`` → ``("example.com", 8765)``; ``"[::1]"`` → ``("[::1]", None)``; None when it is
    not a plain host[:port] (a path, user info, a bad port)."""
    m = _AUTHORITY.fullmatch(text.strip().lower())
    if m is None:
        return None
    port = int(m.group(2)) if m.group(2) is not None else None
    if port is not None and not 0 < port <= 65535:
        return None
    return m.group(1), port


def parse_origin(text: str) -> Origin | None:
    """``"https://Example.com"`` → ``("https", "example.com", 443)``; None for ``"null"``, another scheme, or
    anything past the port (a path, even ``/``: an origin has none)."""
    scheme, sep, rest = text.strip().lower().partition("://")
    if not sep or scheme not in DEFAULT_PORTS:
        return None
    auth = parse_authority(rest)
    if auth is None or rest != rest.strip():
        return None
    host, port = auth
    return scheme, host, port if port is not None else DEFAULT_PORTS[scheme]


def format_origin(origin: Origin) -> str:
    """The origin as a browser writes it in the ``Origin`` header (no default port)."""
    scheme, host, port = origin
    return f"{scheme}://{host}" if DEFAULT_PORTS[scheme] == port else f"{scheme}://{host}:{port}"
