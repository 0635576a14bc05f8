"""Header and body read timeouts: uvicorn's h11 protocol with a deadline per phase of a request.

uvicorn times out only a kept-alive connection between requests; a client that sends its headers a byte at a
time (slowloris), or its body a byte at a time, holds a connection for as long as it likes. Here each request
has two deadlines, counted from when that phase began, not reset by each byte that arrives:

- the head: from the connection's start (or the first byte of the next request on it) until the request's
  headers are complete, ``[http] header_timeout``;
- the body: from the headers until the body's last byte, ``[http] body_timeout`` — also while the server
  discards a body the app did not read (a 413 answered before it), so that drain is bounded too.

At a deadline the client gets ``408 Request Timeout`` when no answer has started (nothing when it sent nothing
yet), and the connection is closed; the app, if it was reading the body, sees the client gone.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from polpo.http.problem import PROBLEM_JSON, problem

__all__ = ["timed_protocol"]

Phase = Literal["connect", "head", "body"]


def timed_protocol(header_timeout: float, body_timeout: float) -> type[H11Protocol]:
    """The protocol class to give uvicorn (``Config(http=...)``), with these deadlines in seconds."""
    return type("TimedH11Protocol", (TimedH11Protocol,), {"header_timeout": header_timeout,
                                                          "body_timeout": body_timeout})


class TimedH11Protocol(H11Protocol):
    header_timeout = 10.0
    body_timeout = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase: Phase | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm("connect")

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:
            if self._phase is None:
                self._arm("head")  # the first bytes of the next request on a kept-alive connection
            elif self._phase == "connect":
                self._phase = "head"  # same deadline: it runs from the connection's start
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()  # a pipelined request may have been read just now

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _follow(self) -> None:
        """Move the deadline along with the client's side of the exchange."""
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            if self._phase != "body":
                self._arm("body")
        elif state is h11.IDLE:
            if self._phase == "body":
                self._arm("head")
        else:
            self._disarm()  # the request is in, or the connection is ending

    def _arm(self, phase: Phase) -> None:
        self._disarm()
        self._phase = phase
        seconds = self.body_timeout if phase == "body" else self.header_timeout
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = None
        self._phase = None

    def _expired(self) -> None:
        phase, self._deadline = self._phase, None
        self._phase = None
        if self.transport.is_closing():
            return
        cycle = self.cycle if phase == "body" else None
        if phase == "head" or (cycle is not None and not cycle.response_started):
            what = "headers" if phase == "head" else "body"
            seconds = self.header_timeout if phase == "head" else self.body_timeout
            self._answer_408(f"the request's {what} did not arrive within {seconds:g} s; send the request at once")
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app's receive() answers http.disconnect, its send() is dropped
            cycle.message_event.set()
        self.transport.close()

    def _answer_408(self, message: str) -> None:
        body = problem(408, "request timeout", message)
        try:
            out = self.conn.send(h11.Response(status_code=408, reason=b"Request Timeout", headers=[
                (b"content-type", PROBLEM_JSON.encode()), (b"content-length", str(len(body)).encode()),
                (b"connection", b"close")]))
            out = (out or b"") + (self.conn.send(h11.Data(data=body)) or b"") + (self.conn.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError:
            return  # h11 will not answer in this state: the connection just closes
        self.transport.write(out)
