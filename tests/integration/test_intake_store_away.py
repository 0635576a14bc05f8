"""A mission file met while the PostgreSQL store is away (its connections reset, new ones refused): the file is not
the user's mistake, so it is neither rejected nor logged as an internal error; the intake's read says the store is
away (a passing fault), and the watcher tries the file again later (nemesis seed 1016 saw "internal error while
handling m2.json" and the file rejected, after a reset between a node and its database)."""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import pytest

from polpo.clock import FakeClock
from polpo.config import StoreSettings
from polpo.fsfaults import StoreAway, passing
from polpo.intake.handler import IntakeHandler
from polpo.store.postgres import PostgresStore
from tests.support.engine import ScriptAgent, config, engine_on_memory
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.anyio


async def test_a_file_met_while_the_database_is_away_is_tried_again_not_rejected(
        tmp_path: Path, postgres_url: str, caplog: pytest.LogCaptureFixture) -> None:
    url = urlsplit(postgres_url)
    proxy = TcpProxy(url.port or 5432).start()
    try:
        store = await PostgresStore.open(StoreSettings(url=url._replace(netloc=f"{url.username}@127.0.0.1:{proxy.port}")
                                                       .geturl(), pool_size=1), clock=FakeClock())
        doc = {"name": "m", "tasks": [{"title": "A", "description": "a", "assignTo": "fake"}]}
        async with engine_on_memory(config(tmp_path), agents={"fake": ScriptAgent()}, store=store,  # type: ignore[arg-type]
                                    stop=False) as run:
            proxy.reset()
            proxy.close()  # the way to the server is gone: open connections reset, new ones refused
            handler = IntakeHandler(run.engine.admission, known_agents=run.engine.agents.known_names(), channels=None)
            with caplog.at_level(logging.ERROR, logger="polpo.intake"), pytest.raises(StoreAway) as away:
                await handler(tmp_path / "m.json", orjson.dumps(doc))
            assert passing(away.value) is not None  # what the watcher waits out, then tries the file again
        assert not [r for r in caplog.records if r.name == "polpo.intake"]
        assert not [e for e in run.events if e.event in ("mission:rejected", "mission:accepted")]
    finally:
        proxy.close()
