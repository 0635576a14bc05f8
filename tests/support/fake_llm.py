"""A scriptable OpenAI-compatible HTTP server on 127.0.0.1 for tests (litellm talks to it over real HTTP).

    from tests.support.fake_llm import FakeLLM, text, tool_call, tool_calls, error, delay

    with FakeLLM() as srv:
        srv.script(tool_call("read_file", {"path": "a.py"}), text("done"))
        ... litellm.acompletion(model="openai/fake-model", api_base=srv.base_url, api_key="sk-test", ...)
        assert srv.requests[0]["messages"][0]["role"] == "system"
        assert srv.requests[0].headers["authorization"] == "Bearer sk-test"

* ``POST /v1/chat/completions`` (also ``/chat/completions``) answers with the next scripted reply; with
  ``"stream": true`` it answers with a Server-Sent-Events stream of one chunk and ``data: [DONE]``.
* ``GET /v1/models`` lists the configured model names.
* Scripted replies are consumed in order; when none is left, ``srv.responder(request)`` (if set) builds one; when
  there is none either, the answer is HTTP 500 ``"FakeLLM: no scripted reply left"`` (counted in
  ``srv.unscripted``).
* Every chat request is recorded in ``srv.requests`` *before* its reply is produced (so a delayed reply is already
  visible): each is the parsed JSON body (a ``dict``) with ``.headers`` (lower-case names), ``.path`` and
  ``.received_at`` (``time.monotonic()``).
* ``srv.after_reply(request)`` (if set) runs once a reply has been written and flushed: a provider that kills
  its client right after answering (``os.kill(pid, SIGKILL)``), so the reply was served and billed but the client
  may never act on it.
* Every success reply carries ``usage`` (prompt/completion/total tokens, estimated at ~4 characters per token
  unless given) and ``finish_reason`` ``"tool_calls"`` when it has tool calls, else ``"stop"``.

Strict modes (``FakeLLM(strict="llama-cpp")``, ``strict="ollama"``) refuse requests the way those servers do,
before a scripted reply is consumed (a refused request is recorded in ``srv.requests`` and in ``srv.refusals``):

* ``"llama-cpp"`` — llama-cpp-python's server (its request types: an assistant message's ``content`` is
  ``NotRequired[str]``): ``"content": null`` on an assistant message → HTTP 422 (FastAPI's validation error);
  an assistant message without ``content`` → HTTP 500 (its chat formatters read ``message["content"]``).
* ``"ollama"`` — Ollama's OpenAI-compatible chat (``openai.FromChatRequest``): a message whose ``content`` is
  null or missing and that has no ``tool_calls`` → HTTP 400 ``invalid message content type: <nil>``; a tool call
  whose ``arguments`` are not JSON → HTTP 400 ``invalid tool call arguments``.
* ``"llama-server"`` — llama.cpp's own server: a ``tool_choice`` other than ``"none"``/``"auto"``/``"required"``
  (the object form naming a function, which llama-server ignores with a warning) → HTTP 400; an assistant tool
  call whose ``arguments`` are not a JSON object → HTTP 500 ``Failed to parse tool call arguments as JSON``.
* ``"vllm-no-tool-parser"`` — a vLLM server started without ``--enable-auto-tool-choice --tool-call-parser``:
  a request with ``tool_choice: "auto"`` → HTTP 400 ``"auto" tool choice requires --enable-auto-tool-choice
  and --tool-call-parser to be set``.

* ``"no-logprobs"`` — a server that does not serve token log-probabilities: a request with ``logprobs`` → HTTP
  400 ``logprobs are not supported by this server``.

Token log-probabilities: a :class:`TextReply` or :class:`ToolCallsReply` may carry ``logprobs`` (the tokens of the
generated text, each with its log-probability and alternatives: :class:`TokenProb`), returned as OpenAI's
``choices[0].logprobs.content[{token, logprob, bytes, top_logprobs}]`` only when the request asks ``logprobs``
(its ``top_logprobs`` alternatives per token at most); ``score_logprobs(content, dists)`` and
``answer_logprobs(content, p_yes)`` build them for a reply whose ``"score": N`` digits (``"answer": "yes"``
words) were sampled from the given distributions.

``FakeLLM(context_window=N)`` plays a server started with an ``N``-token context (llama.cpp's ``-c N``, vLLM's
``--max-model-len N``): a request whose prompt (every message and tool definition as JSON, at ~4 characters per
token, as the usage estimate) plus its ``max_tokens`` exceeds ``N`` → HTTP 400 with vLLM's "maximum context
length" message; recorded in ``srv.refusals`` like the strict modes' refusals, and ``srv.prompt_tokens`` keeps
every request's estimate.

``endless(interval)`` is a generation that never ends: HTTP 200 headers, then a byte of the body every
``interval`` seconds until the client gives up (for a streaming request, a token chunk each time).

The server runs in a background thread (``ThreadingHTTPServer``, one thread per connection, HTTP/1.1 keep-alive),
so code under test may run in the same event loop, another thread or another process.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "STRICT_MODES",
    "DelayReply",
    "EndlessReply",
    "ErrorReply",
    "FakeLLM",
    "RawReply",
    "RecordedRequest",
    "Reply",
    "TextReply",
    "TokenProb",
    "ToolCall",
    "ToolCallsReply",
    "answer_logprobs",
    "delay",
    "endless",
    "error",
    "raw",
    "score_logprobs",
    "text",
    "tool_call",
    "tool_calls",
]


# ------------------------------------------------------------------------------------------------ reply builders


class Reply:
    """Base of every scripted reply."""


@dataclass(frozen=True)
class TokenProb:
    """One generated token, its log-probability, and the most likely tokens at its position (token, logprob)."""

    token: str
    logprob: float = 0.0
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class TextReply(Reply):
    content: str
    usage: Mapping[str, int] | None = None
    finish_reason: str = "stop"
    logprobs: tuple[TokenProb, ...] | None = None


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # the raw JSON string the model "wrote" (may be malformed on purpose)
    id: str | None = None


@dataclass(frozen=True)
class ToolCallsReply(Reply):
    calls: tuple[ToolCall, ...]
    content: str | None = None
    usage: Mapping[str, int] | None = None
    logprobs: tuple[TokenProb, ...] | None = None


@dataclass(frozen=True)
class ErrorReply(Reply):
    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RawReply(Reply):
    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    content_type: str = "application/json"


@dataclass(frozen=True)
class DelayReply(Reply):
    seconds: float
    reply: Reply


@dataclass(frozen=True)
class EndlessReply(Reply):
    interval: float = 0.2


def endless(interval: float = 0.2) -> EndlessReply:
    """A reply that starts (status and headers) and never ends: a byte or token every ``interval`` seconds."""
    return EndlessReply(interval)


def text(content: str, *, usage: Mapping[str, int] | None = None, finish_reason: str = "stop",
         logprobs: Sequence[TokenProb] | None = None) -> TextReply:
    """An assistant message with ``content`` and no tool calls (``logprobs``: its tokens, served when asked)."""
    return TextReply(content, usage, finish_reason, None if logprobs is None else tuple(logprobs))


_SCORE_AT = re.compile(r'"score"\s*:\s*"?([1-5])')
_ANSWER_AT = re.compile(r'"answer"\s*:\s*"(yes|no)')


def _pieces(text: str) -> list[TokenProb]:
    """Text the model was sure of, as tokens of up to four characters."""
    return [TokenProb(text[i:i + 4], 0.0, ((text[i:i + 4], 0.0),)) for i in range(0, len(text), 4)]


def _logprobs_at(content: str, pattern: re.Pattern[str], alternatives: Sequence[Mapping[str, float]],
                 ) -> tuple[TokenProb, ...]:
    """``content`` as tokens, the text of each ``pattern`` match's group 1 (in order) a token of its own whose
    alternatives are the next of ``alternatives`` (token → probability; the written token is the sampled one)."""
    matches = list(pattern.finditer(content))
    if len(matches) != len(alternatives):
        raise ValueError(f"{len(matches)} places in the content, {len(alternatives)} distributions given")
    out: list[TokenProb] = []
    at = 0
    for m, probs in zip(matches, alternatives, strict=True):
        out += _pieces(content[at:m.start(1)])
        sampled = m.group(1)
        ranked = sorted({**probs, sampled: probs.get(sampled, 1e-6)}.items(), key=lambda kv: -kv[1])
        top = tuple((tok, math.log(p)) for tok, p in ranked if p > 0)
        out.append(TokenProb(sampled, math.log(max(probs.get(sampled, 1e-6), 1e-12)), top))
        at = m.end(1)
    return tuple(out + _pieces(content[at:]))


def score_logprobs(content: str, dists: Sequence[Mapping[int, float]]) -> tuple[TokenProb, ...]:
    """The tokens of a JSON reply whose ``"score": N`` digits, in order, were sampled from ``dists`` (level →
    probability; levels left out have none, so the alternatives need not sum to 1)."""
    return _logprobs_at(content, _SCORE_AT, [{str(k): p for k, p in d.items()} for d in dists])


def answer_logprobs(content: str, p_yes: Sequence[float]) -> tuple[TokenProb, ...]:
    """The tokens of a checklist reply whose ``"answer": "yes"|"no"`` words, in order, had these P(yes)."""
    return _logprobs_at(content, _ANSWER_AT, [{"yes": p, "no": 1 - p} for p in p_yes])


def _arguments(arguments: Mapping[str, Any] | str | None) -> str:
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        return arguments  # sent verbatim: lets a test script malformed JSON arguments
    return json.dumps(dict(arguments))


def tool_call(
    name: str,
    arguments: Mapping[str, Any] | str | None = None,
    id: str | None = None,
    *,
    content: str | None = None,
    usage: Mapping[str, int] | None = None,
    logprobs: Sequence[TokenProb] | None = None,
) -> ToolCallsReply:
    """An assistant message calling one tool. ``arguments``: a dict (JSON-encoded) or a raw string (verbatim);
    ``logprobs``: the tokens of what the model generated (its arguments' text, as llama.cpp's server gives them)."""
    return ToolCallsReply((ToolCall(name, _arguments(arguments), id),), content, usage,
                          None if logprobs is None else tuple(logprobs))


def tool_calls(
    calls: Iterable[ToolCallsReply | ToolCall | tuple[Any, ...]],
    *,
    content: str | None = None,
    usage: Mapping[str, int] | None = None,
) -> ToolCallsReply:
    """Several tool calls in one assistant message.

    Items: ``tool_call(...)`` replies (their calls are merged), :class:`ToolCall`, or tuples
    ``(name, arguments)`` / ``(name, arguments, id)``.
    """
    merged: list[ToolCall] = []
    for item in calls:
        if isinstance(item, ToolCallsReply):
            merged.extend(item.calls)
        elif isinstance(item, ToolCall):
            merged.append(item)
        else:
            name, args, *rest = item
            merged.append(ToolCall(name, _arguments(args), rest[0] if rest else None))
    if not merged:
        raise ValueError("tool_calls() needs at least one call")
    return ToolCallsReply(tuple(merged), content, usage)


# (type, code, message) per status, shaped like OpenAI's, so that litellm maps each status to its own exception
_ERROR_SHAPES: dict[int, tuple[str, str, str]] = {
    400: ("invalid_request_error", "bad_request", "FakeLLM scripted error 400"),
    401: (
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided (FakeLLM scripted error 401)",
    ),
    403: ("permission_error", "forbidden", "FakeLLM scripted error 403"),
    404: ("not_found_error", "model_not_found", "FakeLLM scripted error 404"),
    408: ("timeout", "timeout", "FakeLLM scripted error 408"),
    429: ("requests", "rate_limit_exceeded", "FakeLLM scripted error 429: rate limit reached"),
    500: ("server_error", "server_error", "FakeLLM scripted error 500"),
    503: ("server_error", "overloaded", "FakeLLM scripted error 503"),
}


def error(
    status: int = 500,
    body: Mapping[str, Any] | str | bytes | None = None,
    headers: Mapping[str, str] | None = None,
) -> ErrorReply:
    """An HTTP error. ``body`` defaults to an OpenAI-style ``{"error": {...}}``; 429 and 503 default to
    ``retry-after: 0`` (so clients that do retry, retry at once) unless ``headers`` says otherwise."""
    if body is None:
        default = ("api_error", str(status), f"FakeLLM scripted error {status}")
        etype, code, message = _ERROR_SHAPES.get(status, default)
        body = {
            "error": {
                "message": message,
                "type": etype,
                "param": None,
                "code": code,
            }
        }
    if isinstance(body, bytes):
        data = body
    elif isinstance(body, str):
        data = body.encode()
    else:
        data = json.dumps(dict(body)).encode()
    hdrs = dict(headers) if headers is not None else ({"retry-after": "0"} if status in (429, 503) else {})
    return ErrorReply(status, data, hdrs)


def raw(
    body: str | bytes,
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    content_type: str = "application/json",
) -> RawReply:
    """An arbitrary HTTP body (e.g. a broken completion object)."""
    return RawReply(
        status, body.encode() if isinstance(body, str) else body, dict(headers or {}), content_type
    )


def delay(seconds: float, reply: Reply | str) -> DelayReply:
    """``reply`` after ``seconds`` (the request is recorded at once). A plain string means ``text(string)``."""
    return DelayReply(seconds, _as_reply(reply))


def _as_reply(value: Reply | str) -> Reply:
    if isinstance(value, str):
        return TextReply(value)
    if isinstance(value, Reply):
        return value
    raise TypeError(f"not a FakeLLM reply: {value!r}")


# ------------------------------------------------------------------------------------------------ recording


class RecordedRequest(dict[str, Any]):
    """A chat request's parsed JSON body (``req["messages"]``, ``req["tools"]``…), plus how it arrived."""

    headers: dict[str, str]
    path: str
    received_at: float

    def __init__(self, body: Mapping[str, Any], headers: Mapping[str, str], path: str) -> None:
        super().__init__(body)
        self.headers = {k.lower(): v for k, v in headers.items()}
        self.path = path
        self.received_at = time.monotonic()

    @property
    def body(self) -> dict[str, Any]:
        return dict(self)


Responder = Callable[[RecordedRequest], "Reply | str | None"]


# ------------------------------------------------------------------------------------------------ strict modes


def _llama_cpp_refusal(req: Mapping[str, Any]) -> ErrorReply | None:
    for i, msg in enumerate(req.get("messages") or []):
        if not isinstance(msg, dict) or msg.get("role") != "assistant":
            continue
        if "content" not in msg:
            return error(500, {"error": {"message": "'content'", "type": "internal_server_error",
                                         "param": None, "code": None}})
        if not isinstance(msg["content"], str):
            detail = [{"type": "string_type", "loc": ["body", "messages", i, "typed-dict", "content"],
                       "msg": "Input should be a valid string", "input": msg["content"]}]
            return error(422, {"detail": detail})
    return None


def _ollama_refusal(req: Mapping[str, Any]) -> ErrorReply | None:
    for msg in req.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        content = msg.get("content")
        calls = msg.get("tool_calls")
        if not isinstance(content, str | list) and calls is None:
            kind = "<nil>" if content is None else type(content).__name__
            return error(400, {"error": {"message": f"invalid message content type: {kind}",
                                         "type": "invalid_request_error", "param": None, "code": None}})
        for call in calls or []:
            try:
                json.loads(call["function"]["arguments"])
            except (KeyError, TypeError, ValueError):
                return error(400, {"error": {"message": "invalid tool call arguments",
                                             "type": "invalid_request_error", "param": None, "code": None}})
    return None


def _vllm_no_tool_parser_refusal(req: Mapping[str, Any]) -> ErrorReply | None:
    if req.get("tools") and req.get("tool_choice") == "auto":
        return error(400, {"error": {"message": '"auto" tool choice requires --enable-auto-tool-choice and '
                                                "--tool-call-parser to be set",
                                     "type": "BadRequestError", "param": None, "code": 400}})
    return None


def _llama_server_refusal(req: Mapping[str, Any]) -> ErrorReply | None:
    """llama.cpp's own llama-server (``--jinja``): a ``tool_choice`` that is not one of its strings is logged
    ("Wrong type supplied for parameter 'tool_choice', using default value") and ignored, which turns a forced
    call into an offered one: refused here, so a client that relies on it is caught. A history whose tool-call
    arguments are not JSON cannot be rendered by its template: HTTP 500, at once."""
    choice = req.get("tool_choice")
    if choice is not None and choice not in ("none", "auto", "required"):
        return error(400, {"error": {"code": 400, "type": "invalid_request_error",
                                     "message": "FakeLLM strict llama-server: Wrong type supplied for parameter "
                                                "'tool_choice' (llama-server ignores it and uses 'auto')"}})
    for msg in req.get("messages") or []:
        for call in (msg.get("tool_calls") or []) if isinstance(msg, dict) else []:
            try:
                ok = isinstance(json.loads(call["function"]["arguments"]), dict)
            except (KeyError, TypeError, ValueError):
                ok = False
            if not ok:
                return error(500, {"error": {"code": 500, "type": "server_error",
                                             "message": "Failed to parse tool call arguments as JSON: "
                                                        "[json.exception.parse_error.101] parse error"}})
    return None


def _no_logprobs_refusal(req: Mapping[str, Any]) -> ErrorReply | None:
    if req.get("logprobs"):
        return error(400, {"error": {"message": "logprobs are not supported by this server",
                                     "type": "invalid_request_error", "param": "logprobs", "code": 400}})
    return None


#: strict mode → the check that returns the server's refusal of a request, or None when it would accept it
STRICT_MODES: dict[str, Callable[[Mapping[str, Any]], ErrorReply | None]] = {
    "llama-server": _llama_server_refusal,
    "no-logprobs": _no_logprobs_refusal,
    "llama-cpp": _llama_cpp_refusal,
    "ollama": _ollama_refusal,
    "vllm-no-tool-parser": _vllm_no_tool_parser_refusal,
}


# ------------------------------------------------------------------------------------------------ the server


class FakeLLM:
    """The scriptable server. Use as a context manager, or call :meth:`start` / :meth:`close`."""

    def __init__(self, *, models: Iterable[str] = ("fake-model",), host: str = "127.0.0.1", port: int = 0,
                 strict: str | None = None, context_window: int | None = None) -> None:
        if strict is not None and strict not in STRICT_MODES:
            raise ValueError(f"unknown strict mode {strict!r}; known: {', '.join(STRICT_MODES)}")
        self.models = tuple(models)
        self.strict = strict
        self.refusals: list[tuple[int, RecordedRequest]] = []  # (status, request) refused by the strict mode
        self.context_window = context_window
        self.prompt_tokens: list[int] = []  # each request's prompt estimate (with context_window)
        self.responder: Responder | None = None
        self.after_reply: Callable[[RecordedRequest], None] | None = None
        self.unscripted = 0  # requests answered with "no scripted reply left"
        self.errors: list[str] = []  # exceptions raised while answering (a bug in a responder, …)
        self._host = host
        self._bind_port = port  # 0: any free port
        self._queue: deque[Reply] = deque()
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._closed = threading.Event()
        self._conns: set[socket.socket] = set()
        self._seq = 0
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle -----------------------------------------------------------------------------------------------

    def start(self) -> FakeLLM:
        if self._httpd is not None:
            return self
        httpd = _Server((self._host, self._bind_port), _Handler)
        httpd.fake = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-llm", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        httpd = self._httpd
        if httpd is None:
            return
        self._closed.set()
        httpd.shutdown()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:  # wake handler threads idling on keep-alive connections
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # addresses -----------------------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeLLM is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI ``api_base``: ``http://127.0.0.1:PORT/v1``."""
        return self.url + "/v1"

    # scripting -----------------------------------------------------------------------------------------------

    def script(self, *replies: Reply | str) -> FakeLLM:
        """Queue replies, consumed one per chat request in order (a plain string means ``text(string)``)."""
        items = [_as_reply(r) for r in replies]
        with self._lock:
            self._queue.extend(items)
        return self

    @property
    def pending(self) -> int:
        """Scripted replies not consumed yet."""
        with self._lock:
            return len(self._queue)

    def reset(self) -> None:
        """Forget queued replies, recorded requests, the responder and the counters."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self.responder = None
            self.unscripted = 0
            self.errors.clear()
            self.refusals.clear()

    # recording -----------------------------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """The chat requests received so far, in arrival order (a snapshot list)."""
        with self._lock:
            return list(self._requests)

    @property
    def last_request(self) -> RecordedRequest:
        with self._lock:
            if not self._requests:
                raise LookupError("FakeLLM has received no chat request")
            return self._requests[-1]

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """Block until at least ``n`` chat requests arrived (``TimeoutError`` otherwise); returns them."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._requests) >= n, timeout=timeout):
                raise TimeoutError(f"FakeLLM got {len(self._requests)} requests, expected {n}")
            return list(self._requests)

    # internals used by the handler ---------------------------------------------------------------------------

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._seq += 1
            return f"{prefix}{self._seq}"

    def _record(self, req: RecordedRequest) -> Reply | None:
        refusal = STRICT_MODES[self.strict](req) if self.strict is not None else None
        if refusal is None and self.context_window is not None:
            refusal = self._overflow(req, self.context_window)
        with self._cond:
            self._requests.append(req)
            self._cond.notify_all()
            if refusal is not None:  # the real server refuses before generating: the script is not consumed
                self.refusals.append((refusal.status, req))
                return refusal
            if self._queue:
                return self._queue.popleft()
            responder = self.responder
        if responder is None:
            return None
        produced = responder(req)
        return None if produced is None else _as_reply(produced)

    def _overflow(self, req: Mapping[str, Any], window: int) -> ErrorReply | None:
        prompt = _estimate_tokens(req.get("messages", [])) + (_estimate_tokens(req["tools"]) if req.get("tools") else 0)
        with self._lock:
            self.prompt_tokens.append(prompt)
        asked = int(req.get("max_tokens") or 0)
        if prompt + asked <= window:
            return None
        message = (f"This model's maximum context length is {window} tokens. However, you requested "
                   f"{prompt + asked} tokens ({prompt} in the messages, {asked} in the completion). Please reduce "
                   "the length of the messages or completion.")
        return error(400, {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}})

    def _note_unscripted(self) -> None:
        with self._lock:
            self.unscripted += 1

    def _note_error(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)


def _served_logprobs(req: Mapping[str, Any], tokens: Sequence[TokenProb] | None) -> dict[str, Any] | None:
    """OpenAI's ``choices[0].logprobs`` for a request that asked for them, with ``top_logprobs`` alternatives."""
    if not req.get("logprobs") or tokens is None:
        return None
    top = int(req.get("top_logprobs") or 0)

    def entry(token: str, logprob: float) -> dict[str, Any]:
        return {"token": token, "logprob": logprob, "bytes": list(token.encode())}

    return {"content": [{**entry(t.token, t.logprob), "top_logprobs": [entry(a, lp) for a, lp in t.top[:top]]}
                        for t in tokens]}


def _estimate_tokens(value: Any) -> int:
    s = value if isinstance(value, str) else json.dumps(value, default=str)
    return max(1, len(s) // 4)


def _usage(given: Mapping[str, int] | None, request: Mapping[str, Any], completion: Any) -> dict[str, int]:
    prompt = _estimate_tokens(request.get("messages", []))
    comp = _estimate_tokens(completion)
    usage = {"prompt_tokens": prompt, "completion_tokens": comp}
    usage.update({k: int(v) for k, v in (given or {}).items()})
    if "total_tokens" not in (given or {}):
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return usage


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeLLM

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError) or self.fake._closed.is_set():
            return  # a client that gave up (timeout test) or shutdown: not a server bug
        self.fake._note_error(f"handler error: {type(exc).__name__}: {exc}")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes; Nagle + delayed ACK cost ~40 ms
    server_version = "FakeLLM/1.0"

    @property
    def fake(self) -> FakeLLM:
        assert isinstance(self.server, _Server)
        return self.server.fake

    def setup(self) -> None:
        super().setup()
        self.fake._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.fake._track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # plumbing -----------------------------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(
        self, status: int, body: bytes, content_type: str, headers: Mapping[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _send_json(self, status: int, obj: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json", headers)

    def _send_error(self, status: int, message: str, etype: str) -> None:
        self._send_json(status, {"error": {"message": message, "type": etype, "param": None, "code": None}})

    # routes -------------------------------------------------------------------------------------------------

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/v1/models", "/models"):
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "fake-llm"} for m in self.fake.models
            ]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_error(404, f"FakeLLM: no route GET {self.path}", "not_found")

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        body = self._read_body()
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self._send_error(404, f"FakeLLM: no route POST {self.path}", "not_found")
            return
        try:
            payload = json.loads(body or b"{}")
            if not isinstance(payload, dict):
                raise ValueError("the body is not a JSON object")
        except ValueError as exc:
            self._send_error(400, f"FakeLLM: invalid JSON body: {exc}", "invalid_request_error")
            return
        req = RecordedRequest(payload, dict(self.headers.items()), self.path)
        try:
            reply = self.fake._record(req)
        except Exception as exc:
            self.fake._note_error(f"responder raised {type(exc).__name__}: {exc}")
            self._send_error(500, f"FakeLLM: responder raised {type(exc).__name__}: {exc}", "fake_llm_error")
            return
        if reply is None:
            self.fake._note_unscripted()
            self._send_error(500, "FakeLLM: no scripted reply left", "fake_llm_exhausted")
            return
        self._answer(req, reply)
        if self.fake.after_reply is not None:
            self.fake.after_reply(req)

    def _endless(self, reply: EndlessReply, stream: bool) -> None:
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if stream else "application/json")
        if not stream:
            self.send_header("Content-Length", str(10**9))
        self.end_headers()
        piece = b'data: {"choices": [{"index": 0, "delta": {"content": "again "}}]}\n\n' if stream else b" "
        while not self.fake._closed.wait(reply.interval):
            try:
                self.wfile.write(piece)
                self.wfile.flush()
            except OSError:
                return  # the client gave up

    def _answer(self, req: RecordedRequest, reply: Reply) -> None:
        while isinstance(reply, DelayReply):
            if self.fake._closed.wait(reply.seconds):
                self.close_connection = True
                return
            reply = reply.reply
        if isinstance(reply, ErrorReply):
            self._send(reply.status, reply.body, "application/json", reply.headers)
            return
        if isinstance(reply, EndlessReply):
            self._endless(reply, bool(req.get("stream")))
            return
        if isinstance(reply, RawReply):
            self._send(reply.status, reply.body, reply.content_type, reply.headers)
            return
        message: dict[str, Any] = {"role": "assistant"}
        if isinstance(reply, TextReply):
            message["content"] = reply.content
            finish_reason = reply.finish_reason
            usage = _usage(reply.usage, req, reply.content)
        elif isinstance(reply, ToolCallsReply):
            message["content"] = reply.content
            message["tool_calls"] = [
                {
                    "id": call.id or self.fake._next_id("call_fake_"),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in reply.calls
            ]
            finish_reason = "tool_calls"
            usage = _usage(reply.usage, req, message["tool_calls"])
        else:  # pragma: no cover - every Reply subclass is handled above
            raise TypeError(f"unknown reply {reply!r}")
        completion_id = self.fake._next_id("chatcmpl-fake-")
        model = str(req.get("model") or (self.fake.models[0] if self.fake.models else "fake-model"))
        created = int(time.time())
        if req.get("stream"):
            delta = dict(message)
            if "tool_calls" in delta:
                delta["tool_calls"] = [{"index": i, **tc} for i, tc in enumerate(delta["tool_calls"])]
            chunk = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                "usage": usage,
            }
            stream = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
            self._send(200, stream, "text/event-stream", {"Cache-Control": "no-cache"})
            return
        self._send_json(
            200,
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "system_fingerprint": "fake-llm",
                "choices": [
                    {"index": 0, "message": message, "finish_reason": finish_reason,
                     "logprobs": _served_logprobs(req, reply.logprobs)}
                ],
                "usage": usage,
            },
        )
