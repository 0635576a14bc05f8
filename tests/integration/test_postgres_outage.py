"""A PostgreSQL outage is a pause: no transaction is dropped or written twice, and the event follower waits.

Real faults only: a private server stopped with ``pg_ctl stop -m fast`` and started again under a writing store,
and a TCP proxy that loses a COMMIT on its way to the server or the server's answer on its way back (the one
case where the client cannot know whether its batch was written). Each test then reads the events table
itself: every event once, numbers gapless.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import anyio.lowlevel
import asyncpg
import pytest

from polpo.clock import FakeClock
from polpo.config import StoreSettings
from polpo.events import catalog as E
from polpo.events.log import EventLog
from polpo.store import spend_writes
from polpo.store.cluster.follower import EventFollower
from polpo.store.errors import StoreError
from polpo.store.postgres import PostgresStore
from polpo.store.postgres_conn import target
from polpo.store.postgres_faults import is_outage
from tests.support.pg_proxy import PgProxy
from tests.support.postgres import PgCluster, running_cluster
from tests.support.stores import writing

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(("error", "outage"), [
    (ConnectionRefusedError(111, "Connection refused"), True),
    (ConnectionResetError(104, "Connection reset by peer"), True),
    (TimeoutError(), True),
    (asyncpg.CannotConnectNowError("the database system is starting up"), True),
    (asyncpg.AdminShutdownError("terminating connection due to administrator command"), True),
    (asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"), True),
    (asyncpg.TooManyConnectionsError("sorry, too many clients already"), True),
    (asyncpg.InterfaceError("cannot call Connection.fetch(): connection is closed"), True),
    (asyncpg.InternalClientError("cannot switch to state 11; another operation (2) is in progress"), True),
    (asyncpg.UniqueViolationError("duplicate key value"), False),
    (asyncpg.InterfaceError("cannot perform operation: another operation is in progress"), False),
    (asyncpg.QueryCanceledError("canceling statement due to user request"), False),
    (ValueError("bad"), False),
])
def test_which_errors_are_an_outage(error: BaseException, outage: bool) -> None:
    assert is_outage(error) is outage


async def test_a_session_the_server_ended_during_a_pause_mid_transaction_is_an_outage(postgres_url: str) -> None:
    """Nemesis seed 14822's InternalClientError, on a real server: a node paused between two statements of a claim
    for longer than ``idle_in_transaction_session_timeout`` (polpo.store.fencing.session_settings) finds its
    session ended by the server. asyncpg reads the server's FATAL error (state 2) before it sees the socket close,
    and the claim's next statement (state 11) collides with it. It is a lost connection in other words, and
    counts as one: the claim waits and tries again on a new connection."""
    c = await asyncpg.connect(postgres_url, server_settings={"idle_in_transaction_session_timeout": "300"})
    try:
        await c.execute("BEGIN")
        time.sleep(1.5)  # the whole event loop stopped, as by SIGSTOP: the server ends the idle session meanwhile
        # one turn of the loop later, its select sees the socket readable, and this task goes first: the read of
        # the FATAL error follows it; the close is read a turn later
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()
        with pytest.raises(Exception) as caught:
            await c.fetch("SELECT $1::int", 1)
    finally:
        c.terminate()
    assert type(caught.value).__name__ == "InternalClientError", caught.value
    assert is_outage(caught.value)


def test_a_servers_error_of_several_lines_is_said_on_one() -> None:
    """A daemon that cannot go on says why on one line, and PostgreSQL's errors carry DETAIL: and HINT: lines
    (nemesis seed 4140: a start during recovery exited with its reason cut in two)."""
    exc = asyncpg.CannotConnectNowError("the database system is not yet accepting connections\n"
                                        "DETAIL:  Consistent recovery state has not been yet reached.")
    said = str(target(StoreSettings(url="postgresql://polpo@db:5432/polpo")).error("connect to", exc))
    assert "\n" not in said
    assert said.startswith("cannot connect to the PostgreSQL store at polpo@db:5432/polpo: the database system is "
                           "not yet accepting connections DETAIL: Consistent recovery state has not been yet reached.;")


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[PgCluster]:
    """A server of these tests' own: they stop and start it, which the session's shared one must not see."""
    with running_cluster() as cluster:
        yield cluster


async def _open(url: str) -> PostgresStore:
    return await PostgresStore.open(StoreSettings(url=url, pool_size=2), clock=FakeClock())


def _note(i: int) -> E.NotificationSent:
    return E.NotificationSent(channel="c", event=f"n{i}")


async def _stored(url: str) -> list[tuple[int, str]]:
    conn = await asyncpg.connect(url.replace("?sslmode=disable", ""))
    try:
        rows = await conn.fetch("SELECT seq, data FROM events ORDER BY seq")
    finally:
        await conn.close()
    return [(r["seq"], r["data"]) for r in rows]


def _assert_each_once(stored: list[tuple[int, str]], n: int) -> None:
    assert [seq for seq, _ in stored] == list(range(1, n + 1))  # gapless: nothing lost, nothing extra
    names = sorted(int(data.split('"event":"n')[1].split('"')[0]) for _, data in stored)
    assert names == list(range(n))  # each batch written once


@contextlib.asynccontextmanager
async def _proxy(postgres_url: str) -> AsyncIterator[tuple[PgProxy, str]]:
    port = int(postgres_url.rsplit(":", 1)[1].split("/", 1)[0])
    proxy = PgProxy(port)
    await proxy.start()
    try:
        yield proxy, postgres_url.replace(f":{port}/", f":{proxy.port}/") + "?sslmode=disable"
    finally:
        await proxy.close()


@pytest.mark.parametrize("lose", ["lose_commit", "lose_answer"])
async def test_a_batch_whose_commit_was_lost_is_written_exactly_once(postgres_url: str, lose: str) -> None:
    async with _proxy(postgres_url) as (proxy, url):
        store = await _open(url)
        async with writing(store):
            await store.commit(store.tx().event(_note(0)))
            proxy.armed = lose  # type: ignore[assignment]
            with anyio.fail_after(30):
                await store.commit(store.tx().event(_note(1)).event(_note(2)))
            await store.commit(store.tx().event(_note(3)))
            assert proxy.fired == 1
            assert store.in_doubt is None
            assert store.last_seq == 4
        await store.close()
    _assert_each_once(await _stored(postgres_url), 4)


@pytest.mark.parametrize("lose", ["lose_commit", "lose_answer"])
async def test_spend_whose_commit_was_lost_is_counted_exactly_once(postgres_url: str, lose: str) -> None:
    """A batch of spend alone (no event to recognise it by) adds to its rows: written again after a commit that
    was in fact made, the call would be counted twice. Its transaction's id tells."""
    row = ("mission", "m", "", "m", 100, 20, 0.25, 1, 1, 0, None, None, "2026-01-01T00:00:00.000Z")
    async with _proxy(postgres_url) as (proxy, url):
        store = await _open(url)
        async with writing(store):
            await store.commit(spend_writes.add(store.tx(), row))
            proxy.armed = lose  # type: ignore[assignment]
            with anyio.fail_after(30):
                await store.commit(spend_writes.add(store.tx(), row))
            await store.commit(spend_writes.add(store.tx(), row))
            assert proxy.fired == 1 and store.in_doubt is None
            [stored] = await store.spend_now("m", None)
        await store.close()
    assert (stored["tokens_in"], stored["tokens_out"], stored["usd"], stored["calls"]) == (300, 60, 0.75, 3)


async def test_a_database_restart_under_a_writing_store_loses_and_repeats_nothing(own_cluster: PgCluster) -> None:
    name = own_cluster.create_database()
    url = own_cluster.url(name)
    store = await _open(url)
    errors: list[str] = []
    n = 60

    async def produce() -> None:
        for i in range(n):
            try:
                await store.commit(store.tx().event(_note(i)))
            except StoreError as e:
                errors.append(str(e))
            await anyio.sleep(0.05)

    try:
        async with writing(store), anyio.create_task_group() as tg:
            tg.start_soon(produce)
            await anyio.sleep(0.5)
            await anyio.to_thread.run_sync(own_cluster.stop_server, "fast")
            await anyio.sleep(3)
            assert store.unavailable is not None  # the writer noticed and waits
            await anyio.to_thread.run_sync(own_cluster.start_server)
            with anyio.fail_after(60):
                while store.last_seq < n:
                    await anyio.sleep(0.1)
    finally:
        await store.close()
    assert errors == []
    assert store.unavailable is None
    _assert_each_once(await _stored(url), n)


async def test_the_event_follower_waits_out_a_database_restart(own_cluster: PgCluster, tmp_path: Path) -> None:
    name = own_cluster.create_database()
    url = own_cluster.url(name)
    store = await _open(url)
    log = EventLog(tmp_path / "events.jsonl")
    follower = EventFollower(target(StoreSettings(url=url)), store.events_after, log, "n1",
                             on_remote=lambda _e: None, on_claims=lambda: None)
    store.log_follower = follower.poke
    try:
        async with writing(store), anyio.create_task_group() as tg:
            tg.start_soon(follower.run)
            await store.commit(store.tx().event(_note(0)))
            await anyio.to_thread.run_sync(own_cluster.stop_server, "fast")
            await anyio.sleep(5.0 + 1)  # a safety sweep of the follower with the database away
            await anyio.to_thread.run_sync(own_cluster.start_server)
            await store.commit(store.tx().event(_note(1)))
            with anyio.fail_after(60):
                while log.last_seq < 2:
                    await anyio.sleep(0.1)
            tg.cancel_scope.cancel()
    finally:
        await store.close()
        log.close()
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert [ln.split('"seq":')[1].split(",")[0] for ln in lines] == ["1", "2"]
