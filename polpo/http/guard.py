"""Which requests a browser may make: the API runs commands, and a web page the user visits must not be able
to drive it, token or not.

A browser sends some cross-origin requests without asking first (a form post, a ``text/plain`` or
``no-cors`` fetch), and a page whose DNS name is rebound to 127.0.0.1 is same-origin to it. So, on every HTTP
request, in this order:

1. ``Host`` must be a name of this API: the listen address, the address the connection reached, ``localhost``,
   ``127.0.0.1`` or ``[::1]`` on the port it listens on, or an ``[http] hosts`` entry — else 421. A rebound
   name is none of these. (An IP literal is never a rebound name, so the address reached always counts.)
2. A request that says it comes from a web page of another origin — an ``Origin`` that is not one of those
   names (``null`` included), or no ``Origin`` but ``Sec-Fetch-Site: cross-site`` — is refused with 403
   unless that origin is in ``[http] allowed_origins``. A link from elsewhere that opens the web view (a
   top-level navigation) is not refused; frames and reads are. No CORS headers are sent to other origins,
   so a foreign page could not read an answer anyway; to an allowed origin they are (and its preflight is
   answered), so that its page can call the API with ``fetch``.
3. POST, PUT, PATCH and DELETE must say ``Content-Type: application/json`` — else 415. That is no
   "simple" request: a browser sends it cross-origin only after a preflight, which only an allowed origin
   passes.

Clients that are not browsers (the CLI, curl, scripts) send no ``Origin`` and are not affected beyond 3.
``decide`` is the whole policy, a pure function of the request's headers; ``BrowserGuard`` applies it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from polpo.config import HttpSettings
from polpo.http.problem import PROBLEM_JSON, problem
from polpo.origins import format_origin, parse_authority, parse_origin

__all__ = ["BrowserGuard", "GuardPolicy", "Seen", "Verdict", "decide", "seen"]

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
SAFE_FETCH_SITES = frozenset({"same-origin", "none"})  # "none": typed in, a bookmark
PREFLIGHT_ANSWER = [(b"access-control-allow-methods", b"GET, POST"),
                    (b"access-control-allow-headers", b"authorization, content-type, last-event-id"),
                    (b"access-control-max-age", b"600")]


@dataclass(frozen=True)
class GuardPolicy:
    listen_host: str  # as a Host header writes it: "127.0.0.1", "[::1]", "0.0.0.0" (the URL in http.json)
    listen_port: int  # 0 until bound: the port a connection reached is the one used
    hosts: frozenset[str]  # [http] hosts: "name" (any port) or "name:port"
    allowed_origins: frozenset[str]

    @classmethod
    def of(cls, http: HttpSettings) -> GuardPolicy:
        host, port = http.host_port() or ("127.0.0.1", 0)
        return cls(_as_host(host), port, frozenset(http.hosts), frozenset(http.allowed_origins))


@dataclass(frozen=True)
class Seen:
    """The request, as far as the guard looks at it (header values as sent, None when absent)."""

    method: str
    host: str | None
    origin: str | None = None
    content_type: str | None = None
    fetch_site: str | None = None
    fetch_mode: str | None = None
    fetch_dest: str | None = None
    preflight: bool = False  # OPTIONS with Access-Control-Request-Method: a browser asking first
    server: tuple[str, int] | None = None  # the local address the connection reached


@dataclass(frozen=True)
class Verdict:
    status: int = 0  # 0: serve it; 204: answer the preflight; else refuse with this status
    error: str = ""
    message: str = ""
    cors: str | None = None  # an allowed foreign origin: the answer carries Access-Control-Allow-Origin for it


SERVE = Verdict()


def decide(policy: GuardPolicy, req: Seen) -> Verdict:
    port = req.server[1] if req.server else policy.listen_port
    own_address = _as_host(req.server[0]) if req.server else None
    host = parse_authority(req.host) if req.host is not None else None
    if host is None or not _names_us(policy, host[0], host[1] if host[1] is not None else 80, port, own_address):
        shown = "no Host header" if req.host is None else f"Host {req.host[:100]!r}"
        names = ", ".join(sorted({policy.listen_host, *LOOPBACK_NAMES}))
        return Verdict(421, "misdirected request",
                       f"{shown} is not a name of this API ({names} on port {port}, or [http] hosts); to reach it "
                       "by another name, add that name to [http] hosts (behind a reverse proxy: have it pass on the "
                       "Host it was called with, and list that)")
    cors = None
    if req.origin is not None:
        origin = parse_origin(req.origin)
        if origin is None or not _names_us(policy, origin[1], origin[2], port, own_address):
            written = format_origin(origin) if origin is not None else None
            if written is None or written not in policy.allowed_origins:
                return _foreign(f"a page of origin {req.origin[:100]!r}", written)
            cors = written
    elif req.fetch_site is not None and req.fetch_site.lower() not in SAFE_FETCH_SITES and not (
            req.method in ("GET", "HEAD") and req.fetch_mode == "navigate" and req.fetch_dest in (None, "document")):
        return _foreign(f"a {req.fetch_site} request (Sec-Fetch-Site)", None)
    if req.preflight and cors is not None:
        return Verdict(204, cors=cors)
    if req.method in MUTATING and not _is_json(req.content_type):
        return Verdict(415, "unsupported media type",
                       f"send {req.method} with Content-Type: application/json (got "
                       f"{(req.content_type or 'none')[:100]!r}; cancel, retry and approve take an empty body or "
                       "{}): other types are refused so that no web page can post to the API", cors)
    return Verdict(cors=cors) if cors else SERVE


def _foreign(what: str, origin: str | None) -> Verdict:
    fix = (f'to let that page call it, add "{origin}" to [http] allowed_origins' if origin
           else "the API serves its own web view and clients that are not browsers")
    return Verdict(403, "cross-origin request refused", f"{what} may not call this API; {fix}")


def _names_us(policy: GuardPolicy, host: str, port: int, actual: int, own_address: str | None) -> bool:
    if host in policy.hosts or f"{host}:{port}" in policy.hosts:
        return True
    return port == actual and (host in LOOPBACK_NAMES or host == policy.listen_host or host == own_address)


def _is_json(content_type: str | None) -> bool:
    return content_type is not None and content_type.partition(";")[0].strip().lower() == "application/json"


def _as_host(address: str) -> str:
    """An address as a Host header writes it: IPv6 in brackets, lowercase."""
    return f"[{address.lower()}]" if ":" in address else address.lower()


_WANTED = {b"host": "host", b"origin": "origin", b"content-type": "content_type", b"sec-fetch-site": "fetch_site",
           b"sec-fetch-mode": "fetch_mode", b"sec-fetch-dest": "fetch_dest"}


def seen(scope: Scope) -> Seen:
    found: dict[str, str] = {}
    preflight = False
    for name, value in scope["headers"]:
        key = _WANTED.get(name)
        if key is not None and key not in found:  # the first of repeated headers
            found[key] = value.decode("latin-1")
        elif name == b"access-control-request-method":
            preflight = True
    server = scope.get("server")
    return Seen(method=scope["method"], host=found.get("host"), origin=found.get("origin"),
                content_type=found.get("content_type"), fetch_site=found.get("fetch_site"),
                fetch_mode=found.get("fetch_mode"), fetch_dest=found.get("fetch_dest"),
                preflight=preflight and scope["method"] == "OPTIONS",
                server=(str(server[0]), int(server[1])) if server and server[1] is not None else None)


class BrowserGuard:
    """ASGI middleware applying ``decide`` to every HTTP request (the lifespan passes)."""

    def __init__(self, app: ASGIApp, policy: GuardPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        verdict = decide(self.policy, seen(scope))
        if verdict.status == 0 and verdict.cors is None:
            await self.app(scope, receive, send)
            return
        cors = _cors_headers(verdict.cors)
        if verdict.status == 0:
            async def send_with_cors(message: Message) -> None:
                if message["type"] == "http.response.start":
                    message = {**message, "headers": [*message.get("headers", ()), *cors]}
                await send(message)

            await self.app(scope, receive, send_with_cors)
            return
        if verdict.status == 204:
            await _answer(send, 204, b"", [*cors, *PREFLIGHT_ANSWER])
            return
        body = problem(verdict.status, verdict.error, verdict.message)
        await _answer(send, verdict.status, body, [(b"content-type", PROBLEM_JSON.encode()), *cors])


def _cors_headers(origin: str | None) -> list[tuple[bytes, bytes]]:
    return [] if origin is None else [(b"access-control-allow-origin", origin.encode()), (b"vary", b"Origin")]


async def _answer(send: Send, status: int, body: bytes, headers: Iterable[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [*headers, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
