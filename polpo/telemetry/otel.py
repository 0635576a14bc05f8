"""OpenTelemetry tracing, an optional extra (``pip install 'polpo[otel]'``), configured the standard way.

Off unless the environment asks for it: ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console``; ``none`` turns it
off) or an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), and not
``OTEL_SDK_DISABLED=true``. The OTLP exporter (HTTP/protobuf) and the batch processor read their own ``OTEL_*``
variables (headers, timeouts, batch sizes); ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` name the
service (``polpo`` by default). Asked for without the extra installed, the daemon does not start: it says so in
one line, with the pip command (:mod:`polpo.extras`).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from polpo import __version__
from polpo.store.protocol import Store
from polpo.telemetry.follow import ReviewsFn

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from polpo.telemetry.spans import EventSpans

log = logging.getLogger("polpo.telemetry")

__all__ = ["Tracing", "start_tracing", "wanted"]


def wanted() -> bool:
    env = os.environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    return bool(exporter or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


class Tracing:
    """The span builder subscribed to the store, and the provider to flush at shutdown."""

    def __init__(self, spans: EventSpans, provider: TracerProvider) -> None:
        self.spans = spans
        self.provider = provider

    async def run(self) -> None:
        await self.spans.run()

    def shutdown(self) -> None:
        self.provider.shutdown()  # exports what is still batched


def start_tracing(store: Store, reviews: ReviewsFn, transcripts: ReviewsFn | None = None) -> Tracing | None:
    if not wanted():
        return None
    provider = make_provider()  # the daemon checked at start that the extra is installed (polpo.extras)
    from polpo.telemetry.spans import EventSpans

    spans = EventSpans(provider.get_tracer("polpo", __version__), reviews, transcripts)
    store.subscribe(spans.observe)
    return Tracing(spans, provider)


def make_provider() -> TracerProvider:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

    attrs = {"service.version": __version__}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attrs["service.name"] = "polpo"
    provider = TracerProvider(resource=Resource.create(attrs))
    names = [n.strip().lower() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]
    for name in names or ["otlp"]:
        exporter: SpanExporter
        if name == "console":
            exporter = ConsoleSpanExporter()
        elif name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        else:
            log.warning("OTEL_TRACES_EXPORTER=%s is not supported here (otlp, console); ignored", name)
            continue
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider
