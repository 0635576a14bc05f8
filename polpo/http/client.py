"""The CLI's way into a daemon that serves the API: find it through ``<state_dir>/http.json``, call it with
the standard library (no HTTP client import on the CLI's quick path), the token from ``[http] token_env``."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["ApiAnswer", "api_url", "call"]


class ApiAnswer:
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.body = body


def api_url(state_dir: Path, daemon_pid: int | None) -> str | None:
    """The API's base URL when the daemon holding ``state_dir`` serves one."""
    try:
        info = json.loads((state_dir / "http.json").read_text())
    except (OSError, ValueError):
        return None
    if daemon_pid is None or info.get("pid") != daemon_pid:
        return None  # left behind by a daemon that is gone
    url = info.get("url")
    return url if isinstance(url, str) else None


def call(base: str, method: str, path: str, token_env: str, timeout: float = 30.0,
         body: dict[str, Any] | None = None) -> ApiAnswer:
    """One request; an HTTP error status is an answer too (its JSON body says why). OSError when unreachable."""
    post = method == "POST"  # a JSON body, as the API asks of every POST (docs/explanation/security.md)
    data = json.dumps(body or {}).encode() if post else None
    req = urllib.request.Request(base + urllib.parse.quote(path, safe="/:"), method=method, data=data,
                                 headers={"Content-Type": "application/json"} if post else {})
    token = os.environ.get(token_env)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return ApiAnswer(r.status, json.loads(r.read() or b"{}"))
    except urllib.error.HTTPError as e:
        try:
            body = json.loads(e.read() or b"{}")
        except ValueError:
            body = {}
        return ApiAnswer(e.code, body if isinstance(body, dict) else {})
