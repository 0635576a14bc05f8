"""The HTTP side wired to a running engine: event hub, metrics, the app and its server, started and stopped by
the daemon (bind at start-up, serve in its task group, stop after the shutdown event is out)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from anyio.abc import TaskGroup

from polpo import __version__
from polpo.config import Config
from polpo.http.app import build_app
from polpo.http.auth import HttpPlan
from polpo.http.context import ApiContext
from polpo.http.hub import EventHub
from polpo.http.server import HttpServer
from polpo.store.protocol import Store
from polpo.store.readers import ReaderPool
from polpo.telemetry.follow import ReviewsFn
from polpo.telemetry.prometheus import Metrics

if TYPE_CHECKING:
    from polpo.engine.engine import Engine

__all__ = ["HttpService"]


class HttpService:
    def __init__(self, cfg: Config, plan: HttpPlan, store: Store, engine: Engine, *, channels: set[str],
                 readers: ReaderPool, reviews: ReviewsFn,
                 offer: Callable[[Path, bytes], Awaitable[bool]] | None = None) -> None:
        self.hub = EventHub()
        store.subscribe(self.hub.publish)
        board, dispatcher = engine.board, engine.dispatcher
        self.metrics = Metrics(
            version=__version__, tasks_by_status=lambda: Counter(str(t.status) for t in board.tasks.values()),
            queue_depth=lambda: len(dispatcher.source), running=lambda: len(dispatcher.running),
            missions_running=lambda: len(board.missions), stream_clients=lambda: len(self.hub.listeners),
            reviews=reviews)
        store.subscribe(self.metrics.observe)
        ctx = ApiContext(cfg=cfg, version=__version__, readers=readers, hub=self.hub,
                         apply_command=engine.apply_command,
                         known_agents=engine.agents.known_names(),
                         channels=channels, metrics=self.metrics.render, offer=offer, clock=engine.clock)
        self.app = build_app(ctx, plan.token)
        self.server = HttpServer(plan, cfg.state_dir, cfg.http)

    @property
    def url(self) -> str:
        return self.server.url

    def bind(self) -> None:
        self.server.bind()

    def start(self, tg: TaskGroup) -> None:
        tg.start_soon(self.server.serve, self.app)
        tg.start_soon(self.metrics.run)

    async def stop(self) -> None:
        self.hub.close()  # event streams end
        await self.server.stop()

    def close(self) -> None:
        self.server.close()
