"""Who may call the API: the listen address and the bearer token, checked at start-up and on every request.

With ``[http] token_env`` naming a variable that holds a value, every request but ``GET /healthz`` needs
``Authorization: Bearer <token>``; a browser may send the token as the password of HTTP Basic auth instead
(any user name), which is how the web view works behind a token: the browser asks once. Without a token the
daemon listens only on a loopback address: binding anything else without one is a start-up error.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import os
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from polpo.config import Config, ConfigError
from polpo.http.problem import PROBLEM_JSON, problem

__all__ = ["HttpPlan", "TokenAuth", "basic_user", "http_plan"]

OPEN_PATHS = frozenset({"/healthz"})


@dataclass(frozen=True)
class HttpPlan:
    host: str
    port: int
    token: str | None


def http_plan(cfg: Config) -> HttpPlan | None:
    """What ``[http]`` asks for, or None when it is off; a ``ConfigError`` for an unsafe combination."""
    hp = cfg.http.host_port()
    if hp is None:
        return None
    host, port = hp
    token = os.environ.get(cfg.http.token_env) or None
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"{cfg.source}: http.listen: {cfg.http.listen} is not a loopback address and ${cfg.http.token_env} "
            "is not set: anyone who can reach it could run missions. Set the token (every call then needs "
            f"Authorization: Bearer …) or listen on 127.0.0.1")
    return HttpPlan(host, port, token)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to anything


class TokenAuth:
    """ASGI middleware: 401 without the token (HTTP requests only; the lifespan passes)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token.encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.token is None or scope["type"] != "http" or scope["path"] in OPEN_PATHS or self._ok(scope):
            await self.app(scope, receive, send)
            return
        body = problem(401, "unauthorized", "send Authorization: Bearer <token>")
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", PROBLEM_JSON.encode()), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b'Basic realm="polpo", charset="UTF-8"')]})
        await send({"type": "http.response.body", "body": body})

    def _ok(self, scope: Scope) -> bool:
        assert self.token is not None
        for name, value in scope["headers"]:
            if name != b"authorization":
                continue
            kind, _, cred = value.partition(b" ")
            if kind.lower() == b"basic":
                try:
                    cred = base64.b64decode(cred.strip(), validate=True).partition(b":")[2]
                except (binascii.Error, ValueError):
                    return False
            elif kind.lower() != b"bearer":
                return False
            return hmac.compare_digest(cred.strip(), self.token)
        return False


def basic_user(header: str | None) -> str | None:
    """The user name of an HTTP Basic ``Authorization`` header (the web view's login: who a person said they
    are; the password is the token, checked by :class:`TokenAuth`), else None."""
    if not header:
        return None
    kind, _, cred = header.partition(" ")
    if kind.lower() != "basic":
        return None
    try:
        user = base64.b64decode(cred.strip(), validate=True).partition(b":")[0].decode()
    except (binascii.Error, ValueError):
        return None
    return user or None
