"""The tests' PostgreSQL for faults that kill the server (the nemesis) keeps every commit it acknowledged: with the
throw-away cluster's ``synchronous_commit = off`` an immediate stop lost the last acknowledged commits, a node's
event log (written after the acknowledgement) was then ahead of its store, and the node was refused at its restart
as if its database had been replaced (nemesis seeds 14 and 18 "could not be run")."""

from __future__ import annotations

import anyio
import asyncpg

from tests.support.postgres import running_cluster

ROWS = 300


async def _insert(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CREATE TABLE acked (i int)")
        for i in range(ROWS):  # each its own transaction, acknowledged before the next
            await conn.execute("INSERT INTO acked VALUES ($1)", i)
    finally:
        await conn.close()


async def _count(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM acked"))
    finally:
        await conn.close()


def test_a_durable_cluster_keeps_every_acknowledged_commit_through_an_immediate_stop() -> None:
    with running_cluster(durable=True) as pg:
        url = pg.url(pg.create_database())
        anyio.run(_insert, url)
        pg.stop_server("immediate")  # no shutdown checkpoint: what the server did not write is gone
        pg.start_server()
        assert anyio.run(_count, url) == ROWS
