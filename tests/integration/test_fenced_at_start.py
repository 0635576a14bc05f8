"""A cluster node fenced before it stored ``orchestrator:started`` (its start took longer than its lease: a loaded
machine, nemesis seed 46216) stops with a one-line reason, which its service manager logs before starting it again
as a new member. It ended with a traceback of the task group instead (the reason inside an ExceptionGroup, which
``polpo daemon`` did not recognise as a stop)."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from polpo.config import load_config
from polpo.daemon import Daemon, DaemonError
from polpo.store.cluster.node import ClusterNode
from polpo.store.protocol import Store

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class SlowToStart(Daemon):
    """A daemon whose lease runs out between its join and its first write: the nemesis's fault, made at the
    moment it matters (the lease's heartbeat row set an hour back in the real database)."""

    url = ""

    async def _join_cluster(self, store: Store) -> ClusterNode:
        node = await super()._join_cluster(store)
        conn = await asyncpg.connect(self.url)
        try:
            await conn.execute("UPDATE nodes SET heartbeat_at = clock_timestamp() - interval '1 hour' "
                               "WHERE name = $1", self.cfg.daemon.node)
        finally:
            await conn.close()
        return node


async def test_a_node_fenced_before_it_said_it_started_stops_with_one_line(tmp_path: Path, postgres_url: str) -> None:
    (tmp_path / "missions").mkdir()
    config = tmp_path / "polpo.toml"
    config.write_text(f"""
[daemon]
missions_dir = "{tmp_path / 'missions'}"
state_dir = "{tmp_path / 'state'}"
node = "slow"

[store]
url = "{postgres_url}"
lease = 4
""")
    daemon = SlowToStart(load_config(config), console=None, handle_signals=False)
    daemon.url = postgres_url
    with pytest.raises(DaemonError) as stopped:  # what `polpo daemon` prints as one line, exit 1
        await daemon.run()
    assert str(stopped.value).startswith("stopped: node slow (incarnation ")
    assert "no longer holds its lease" in str(stopped.value)
    assert not daemon.started.is_set()
