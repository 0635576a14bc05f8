"""Routing events to channels without ever making the caller wait.

:meth:`Notifier.route` is synchronous and never blocks: it picks the channels (the event's task's and
mission's own ``notifications`` rules and the config's rules whose globs match its name — see :mod:`.scopes`
— plus the caller's extra channels such as a gate's ``notifyChannels`` or the SLA ``warning_channels``), and
puts the event on each channel's bounded in-memory queue. :meth:`Notifier.run` (a background task) runs one
worker per channel, so a slow webhook delays only its own later deliveries, never the engine and never
another channel; order is kept per channel.

Outcomes come back through callbacks, which the engine turns into ``notification:sent`` /
``notification:failed`` events. Events named ``notification:*`` are never routed, so those reports
cannot feed back into the router. A full queue drops the new notification and reports it as failed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from polpo.clock import Clock, SystemClock
from polpo.events.catalog import Event
from polpo.llm.secrets import redact, redact_url
from polpo.notify.channels import Deliverer, DeliveryError, Notification, Sleep, make_deliverer, needs_http
from polpo.notify.config import CommandChannel, NotifyConfig, SlackChannel, WebhookChannel
from polpo.notify.scopes import ScopeRegistry, Target, resolve

__all__ = ["Notifier", "OnFailed", "OnSent"]

log = logging.getLogger("polpo.notify")

OnFailed = Callable[[str, str, str], None]  # (channel, event name, redacted error)
OnSent = Callable[[str, str], None]  # (channel, event name)


class Notifier:
    """Rules + per-channel queues + workers. Create it, ``start_soon(run)``, call ``route`` from anywhere."""

    def __init__(self, config: NotifyConfig, *, on_failed: OnFailed | None = None, on_sent: OnSent | None = None,
                 clock: Clock | None = None, sleep: Sleep = anyio.sleep,
                 deliverers: Mapping[str, Deliverer] | None = None, scopes: ScopeRegistry | None = None) -> None:
        self.config = config
        self.scopes = scopes  # missions' and tasks' own rules; None: only the config's rules
        self._on_failed = on_failed
        self._on_sent = on_sent
        self._clock = clock or SystemClock()
        self._sleep = sleep
        self._given = dict(deliverers or {})
        self._send: dict[str, MemoryObjectSendStream[Notification]] = {}
        self._recv: dict[str, MemoryObjectReceiveStream[Notification]] = {}
        for name in config.channels:
            self._send[name], self._recv[name] = anyio.create_memory_object_stream[Notification](config.queue_size)
        self._urls = {name: ch.url for name, ch in config.channels.items()
                      if isinstance(ch, WebhookChannel | SlackChannel)}
        self._secrets = {name: _secrets_of(ch) for name, ch in config.channels.items()}
        self._finished = anyio.Event()
        self._running = False

    # ------------------------------------------------------------------------------------------ routing
    def channels_for(self, event_name: str, extra_channels: Iterable[str] = ()) -> list[str]:
        """Channel names for ``event_name`` by the config's rules, then ``extra_channels``, each once."""
        return [t.channel for t in resolve(event_name, self.config.rules, None, None, extra_channels)]

    def targets(self, event: Event, extra_channels: Iterable[str] = ()) -> list[Target]:
        """Where ``event`` goes: its task's and mission's rules, the config's rules, then ``extra_channels``."""
        scopes = self.scopes.for_event(event) if self.scopes is not None else None
        return resolve(event.event, self.config.rules, scopes, event.task_id, extra_channels)

    def route(self, event: Event, extra_channels: Sequence[str] = ()) -> list[str]:
        """Queue ``event`` for its channels and return their names; never blocks, never raises."""
        if not self._send and not extra_channels:  # no channel configured, and rules may name configured ones only
            return []
        queued = []
        try:
            targets = self.targets(event, extra_channels)
        except Exception:  # a bug in scoped routing must not cost the config's rules
            log.exception("scoped notification rules failed on %s", event.event)
            targets = resolve(event.event, self.config.rules, None, None, extra_channels)
        if self.scopes is not None:
            self.scopes.after(event)
        for target in targets:
            name = target.channel
            stream = self._send.get(name)
            if stream is None:
                self._failed(name, event.event, "unknown notification channel")
                continue
            try:
                stream.send_nowait(Notification(event, target.rule))
            except anyio.WouldBlock:
                self._failed(name, event.event,
                             f"queue full ({self.config.queue_size} pending); notification dropped")
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                log.warning("notifier closed; %s for %s not sent", event.event, name)
            else:
                queued.append(name)
        return queued

    # ------------------------------------------------------------------------------------------ workers
    async def run(self) -> None:
        """Deliver until :meth:`close` (queued notifications are sent first) or cancellation."""
        if self._running:
            raise RuntimeError("Notifier.run() is already running")
        self._running = True
        try:
            async with contextlib.AsyncExitStack() as stack, anyio.create_task_group() as tg:
                client = None
                if any(needs_http(ch) for name, ch in self.config.channels.items() if name not in self._given):
                    import httpx  # lazy for the daemon's start-up and memory: only HTTP channels need it

                    client = await stack.enter_async_context(httpx.AsyncClient(follow_redirects=False))
                for name, ch in self.config.channels.items():
                    d = self._given.get(name) or make_deliverer(name, ch, client=client, clock=self._clock,
                                                                sleep=self._sleep)
                    tg.start_soon(self._worker, name, d, self._recv[name])
        finally:
            self._finished.set()

    def close(self) -> None:
        """Accept nothing more; :meth:`run` returns once the queues are drained."""
        for stream in self._send.values():
            stream.close()

    async def drain(self, grace: float) -> bool:
        """:meth:`close`, then wait up to ``grace`` seconds for :meth:`run` to finish; True if it did."""
        self.close()
        if not self._running:
            return True
        with anyio.move_on_after(grace):
            await self._finished.wait()
        return self._finished.is_set()

    def pending(self) -> int:
        """Notifications queued and not yet taken by a worker."""
        return sum(s.statistics().current_buffer_used for s in self._send.values())

    async def _worker(self, name: str, deliverer: Deliverer,
                      queue: MemoryObjectReceiveStream[Notification]) -> None:
        async with queue:
            async for note in queue:
                event = note.event
                try:
                    await deliverer.deliver(note)
                except DeliveryError as e:
                    log.warning("notification %s → %s failed: %s", event.event, name, e)
                    self._failed(name, event.event, str(e))
                except Exception as e:
                    msg = self._scrub(name, f"{type(e).__name__}: {e}")
                    log.warning("notification %s → %s failed unexpectedly: %s", event.event, name, msg)
                    self._failed(name, event.event, msg)
                else:
                    if self._on_sent is not None:
                        _call(self._on_sent, name, event.event)

    def _scrub(self, name: str, text: str) -> str:
        url = self._urls.get(name)
        if url:
            text = text.replace(url, redact_url(url))
        return redact(text, extra=self._secrets[name])

    def _failed(self, channel: str, event_name: str, error: str) -> None:
        if self._on_failed is not None:
            _call(self._on_failed, channel, event_name, error)


def _call(cb: Callable[..., None], *args: str) -> None:
    try:
        cb(*args)
    except Exception:
        log.exception("notification callback failed")


def _secrets_of(ch: object) -> list[str]:
    """Strings that must not appear in a report about this channel (URL tokens, header values, env values)."""
    if isinstance(ch, WebhookChannel):
        return [*_url_parts(ch.url), *ch.headers.values()]
    if isinstance(ch, SlackChannel):
        return _url_parts(ch.url)
    if isinstance(ch, CommandChannel):
        return [v for v in ch.env.values() if len(v) >= 6]
    return []


def _url_parts(url: str) -> list[str]:
    """Path segments and query values that ``redact_url`` would mask, so they are masked in free text too."""
    safe = redact_url(url)
    return [p for p in url.replace("?", "/").replace("&", "/").replace("=", "/").split("/")
            if len(p) >= 8 and p not in safe]
