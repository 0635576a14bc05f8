"""The four deliverers: webhook and Slack over HTTP, a JSON-lines file, a command with the event on stdin.

A deliverer either returns (delivered) or raises :class:`DeliveryError` with a message that is safe to log
and to put in a ``notification:failed`` event: URLs go through ``redact_url``, header values never appear,
response bodies are cut short and scrubbed of secret values.

HTTP retries: connection errors, timeouts, 429 and 5xx are retried ``retries`` times with exponential
backoff (``backoff``, doubled each time, capped at ``backoff_max``, with full jitter); any other 4xx is final at once, since
sending the same request again cannot fix it. 429 is a 4xx that means "later", so it is retried too.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import orjson

from polpo.clock import Clock, SystemClock
from polpo.events.catalog import Event
from polpo.events.render import headline
from polpo.jitter import full_jitter
from polpo.llm.secrets import redact, redact_url
from polpo.mission.schema import NotificationRule
from polpo.notify.config import ChannelConfig, CommandChannel, FileChannel, SlackChannel, WebhookChannel
from polpo.notify.scopes import render_template
from polpo.tools.procs import minimal_env, run_process

if TYPE_CHECKING:
    import httpx

__all__ = ["Deliverer", "DeliveryError", "Notification", "event_json", "make_deliverer", "needs_http", "slack_text",
           "summarize"]

USER_AGENT = "polpo-notify/1"

Sleep = Callable[[float], Awaitable[None]]


class DeliveryError(Exception):
    """A delivery that failed for good; ``str()`` is already redacted."""


@dataclass(frozen=True, slots=True)
class Notification:
    """One event for one channel; ``rule`` is the mission's or task's rule that chose the channel, if any."""

    event: Event
    rule: NotificationRule | None = None


class Deliverer(Protocol):
    async def deliver(self, note: Notification) -> None: ...


def _note(item: Event | Notification) -> Notification:
    return item if isinstance(item, Notification) else Notification(item)


def event_json(item: Event | Notification) -> dict[str, Any]:
    """The event as sent to webhooks, files and commands: the event-log shape plus a readable summary, and
    ``rule`` ({id, name, severity}) when a mission's or task's rule chose the channel."""
    note = _note(item)
    out = {**note.event.to_json_dict(), "summary": summarize(note)}
    if note.rule is not None:
        out["rule"] = {k: v for k, v in (("id", note.rule.id), ("name", note.rule.name),
                                         ("severity", note.rule.severity)) if v is not None}
    return out


def summarize(item: Event | Notification) -> str:
    """One readable line for a person (Slack text, file and webhook ``summary``): the rule's ``template``
    filled from the event, else the shared renderer's line."""
    note = _note(item)
    data = note.event.to_json_dict()
    if note.rule is not None and note.rule.template:
        return render_template(note.rule.template, data)
    return headline(data)


def slack_text(item: Event | Notification) -> str:
    """The summary, escaped for Slack's mrkdwn (``&``, ``<``, ``>``), prefixed so it is found in a channel."""
    text = summarize(item).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f"[polpo] {text}"


# ------------------------------------------------------------------------------------------------- HTTP
class _HttpDeliverer:
    def __init__(self, name: str, ch: WebhookChannel | SlackChannel, client: httpx.AsyncClient,
                 sleep: Sleep) -> None:
        self.name, self.ch, self.client, self.sleep = name, ch, client, sleep
        self.safe_url = redact_url(ch.url)

    def payload(self, note: Notification) -> dict[str, Any]:
        raise NotImplementedError

    def headers(self) -> dict[str, str]:
        return {}

    async def deliver(self, note: Notification) -> None:
        body = orjson.dumps(self.payload(note))
        headers = {"content-type": "application/json", "user-agent": USER_AGENT,
                   "x-polpo-event": note.event.event, **self.headers()}
        attempts = self.ch.retries + 1
        delay = self.ch.backoff.total_seconds()
        last = ""
        for n in range(1, attempts + 1):
            retry, last = await self._attempt(body, headers)
            if not retry:
                if last:
                    raise DeliveryError(f"{self.safe_url}: {last}")
                return
            if n < attempts:  # full jitter: the deliveries a receiver's outage failed do not return in lockstep
                await self.sleep(full_jitter(min(delay, self.ch.backoff_max.total_seconds())))
                delay *= 2
        raise DeliveryError(f"{self.safe_url}: {last} (gave up after {attempts} attempt(s))")

    async def _attempt(self, body: bytes, headers: dict[str, str]) -> tuple[bool, str]:
        """``(retry?, error)``: ``(False, "")`` is success."""
        import httpx  # lazy for the daemon's start-up and memory: only HTTP channels need it (~50 ms)

        limit = self.ch.timeout.total_seconds()
        try:
            with anyio.fail_after(limit):  # a hard bound: httpx's timeouts are per phase (connect, each read)
                r = await self.client.post(self.ch.url, content=body, headers=headers, timeout=limit)
        except (httpx.TimeoutException, TimeoutError):
            return True, f"timed out after {limit:g} s"
        except httpx.TransportError as e:
            return True, f"connection failed ({type(e).__name__}{_detail(e)})"
        if r.is_success:
            return False, ""
        text = redact(r.text[:200].strip(), extra=[self.ch.url, *self.headers().values()])
        error = f"HTTP {r.status_code}" + (f": {text}" if text else "")
        return (r.status_code >= 500 or r.status_code == 429), error


def _detail(e: Exception) -> str:
    """The transport error's own words, unless they might quote the URL (tokens)."""
    msg = str(e)
    return f": {redact(msg)}" if msg and "://" not in msg else ""


class WebhookDeliverer(_HttpDeliverer):
    ch: WebhookChannel

    def payload(self, note: Notification) -> dict[str, Any]:
        return event_json(note)

    def headers(self) -> dict[str, str]:
        return dict(self.ch.headers)


class SlackDeliverer(_HttpDeliverer):
    def payload(self, note: Notification) -> dict[str, Any]:
        return {"text": slack_text(note)}


# ---------------------------------------------------------------------------------------- file, command
class FileDeliverer:
    def __init__(self, name: str, ch: FileChannel) -> None:
        self.name, self.path = name, ch.path

    async def deliver(self, note: Notification) -> None:
        line = orjson.dumps(event_json(note)) + b"\n"
        try:
            await anyio.to_thread.run_sync(_append, self.path, line)
        except OSError as e:
            raise DeliveryError(f"{self.path}: cannot append ({e.strerror or e})") from None


def _append(path: Path, line: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)  # one write on an O_APPEND fd: lines never interleave
    finally:
        os.close(fd)


class CommandDeliverer:
    def __init__(self, name: str, ch: CommandChannel, clock: Clock) -> None:
        self.name, self.ch, self.clock = name, ch, clock

    async def deliver(self, note: Notification) -> None:
        timeout = self.ch.timeout.total_seconds()
        res = await run_process(self.ch.argv, cwd=self.ch.cwd or Path.cwd(), clock=self.clock,
                                env=minimal_env({**self.ch.env, "POLPO_EVENT": note.event.event}),
                                stdin=orjson.dumps(event_json(note)), timeout=timeout, grace=2.0,
                                output_limit=4096)
        if res.ok:
            return
        prog = self.ch.argv[0]
        if res.error:
            raise DeliveryError(f"{prog}: {res.error}")
        if res.timed_out:
            raise DeliveryError(f"{prog}: timed out after {timeout:g} s (killed)")
        why = f"exit {res.exit_code}" if res.exit_code is not None else f"killed by signal {res.signal}"
        err = redact(res.stderr_tail.strip()[-200:])
        raise DeliveryError(f"{prog}: {why}" + (f": {err}" if err else ""))


def needs_http(ch: ChannelConfig) -> bool:
    """Whether the channel sends over HTTP (the notifier opens an HTTP client only for such channels)."""
    return isinstance(ch, WebhookChannel | SlackChannel)


def make_deliverer(name: str, ch: ChannelConfig, *, client: httpx.AsyncClient | None, clock: Clock | None = None,
                   sleep: Sleep = anyio.sleep) -> Deliverer:
    """The deliverer for a typed channel; HTTP ones share ``client`` (its lifetime is the caller's; needed by
    HTTP channels only, see :func:`needs_http`)."""
    if isinstance(ch, WebhookChannel | SlackChannel):
        if client is None:
            raise ValueError(f"channel {name!r} sends over HTTP: it needs a client")
        return (WebhookDeliverer if isinstance(ch, WebhookChannel) else SlackDeliverer)(name, ch, client, sleep)
    if isinstance(ch, FileChannel):
        return FileDeliverer(name, ch)
    return CommandDeliverer(name, ch, clock or SystemClock())
