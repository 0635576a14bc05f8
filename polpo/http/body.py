"""Request bodies read under a size cap (``[http] max_body``), never buffered past it.

A declared ``Content-Length`` over the cap is refused before a byte of the body is read; a chunked body (or one
of unknown length) is read until it passes the cap, and the rest is never kept (the server discards it while
the connection drains, bounded by ``[http] body_timeout``). Every route that reads a body reads it with
:func:`read_body` and answers a :class:`BodyRefused` with its ``response()``.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from polpo.http.auth import basic_user
from polpo.http.problem import problem_response

__all__ = ["BodyIncomplete", "BodyRefused", "BodyTooLarge", "declared_over", "json_object", "person", "read_body"]


class BodyRefused(Exception):
    status = 400

    def response(self) -> Response:
        return problem_response(self.status, self.args[0], self.args[1],
                                errors=[{"path": "$", "message": self.args[1]}])


class BodyTooLarge(BodyRefused):
    status = 413

    def __init__(self, limit: int, setting: str) -> None:
        super().__init__("body too large", f"larger than {limit} bytes: send less, or raise {setting}")


class BodyIncomplete(BodyRefused):
    """The client went away (or was timed out) before the body's end: the answer is seldom read."""

    def __init__(self) -> None:
        super().__init__("body incomplete", "the connection ended before the body did")


async def read_body(request: Request, limit: int, setting: str = "[http] max_body") -> bytes:
    """The whole body, at most ``limit`` bytes: :class:`BodyTooLarge` past it, having held at most ``limit + 1``.

    ``setting`` names the config key that set ``limit``, for the message."""
    if declared_over(request.headers.get("content-length"), limit):
        raise BodyTooLarge(limit, setting)
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk[: limit + 1 - len(body)]
            if len(body) > limit:
                raise BodyTooLarge(limit, setting)
    except ClientDisconnect:
        raise BodyIncomplete() from None
    return bytes(body)


def declared_over(content_length: str | None, limit: int) -> bool:
    """A ``Content-Length`` that announces more than ``limit`` bytes (a malformed one is h11's to refuse)."""
    value = (content_length or "").strip()
    return value.isdigit() and int(value) > limit


async def json_object(request: Request, limit: int) -> dict[str, Any] | Response:
    """The request's JSON object (no body: ``{}``), or the answer refusing it."""
    try:
        body = orjson.loads(await read_body(request, limit) or b"{}")
    except BodyRefused as e:
        return e.response()
    except orjson.JSONDecodeError:
        body = None
    if not isinstance(body, dict):
        return problem_response(400, "bad request", "send a JSON object")
    return body


def person(request: Request, body: dict[str, Any]) -> str:
    """Who a command is from: the body's ``by``, else the user name of HTTP Basic auth (the web view's login),
    else ``api``."""
    return str(body.get("by") or basic_user(request.headers.get("authorization")) or "api")[:200]
