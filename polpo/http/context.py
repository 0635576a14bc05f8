"""What the HTTP handlers need from the daemon, handed in as values and callables (no engine import)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from starlette.responses import Response

from polpo.clock import Clock, SystemClock
from polpo.config import Config
from polpo.http.hub import EventHub
from polpo.store.readers import ReaderPool

__all__ = ["ApiContext", "json_response"]

ApplyCommand = Callable[[str, str], Awaitable[tuple[str, str]]]


@dataclass
class ApiContext:
    cfg: Config
    version: str
    readers: ReaderPool
    hub: EventHub
    apply_command: ApplyCommand  # (kind, target) -> (done | refused, answer), as the command inbox answers
    known_agents: list[str]
    channels: set[str]
    metrics: Callable[[], bytes] | None = None  # the Prometheus text
    offer: Callable[[Path, bytes], Awaitable[bool]] | None = None  # the intake, for a file the API wrote
    clock: Clock = field(default_factory=SystemClock)  # the daemon's (injected) clock, for what reads depend on now
    started: float = field(default_factory=time.monotonic)


def json_response(obj: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS), status_code=status, headers=headers,
                    media_type="application/json")
