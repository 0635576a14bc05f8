"""Shared test set-up: asyncio backend for anyio tests, offline litellm, and a private PostgreSQL cluster."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from polpo.clock import FakeClock
from tests.support.postgres import PgCluster, running_cluster
from tests.support.stores import BACKENDS, Backend

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# A run started in the background of a script (`pytest &`, nohup) ignores Ctrl-C, and every program it starts would
# inherit that: the tests that press Ctrl-C as a person at a terminal does (the docs' shell examples) need it back.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PgCluster]:
    """One private PostgreSQL server for the whole run, started on first use (~1 s) and removed at the end.

    Skipped only when the machine has no PostgreSQL server binaries; in CI (CI=true) that is a failure,
    since .ci/run installs them.
    """
    with running_cluster() as cluster:
        yield cluster


@pytest.fixture
def postgres_url(postgres_cluster: PgCluster) -> Iterator[str]:
    """A fresh, empty database of its own for one test, as a TCP libpq URL; dropped afterwards."""
    name = postgres_cluster.create_database()
    yield postgres_cluster.url(name)
    postgres_cluster.drop_database(name)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Each store backend in turn (memory, SQLite, PostgreSQL), empty; open stores with ``await backend.open()``."""
    kind = request.param
    clock = FakeClock()
    if kind == "postgres":
        return Backend(kind, clock, url=request.getfixturevalue("postgres_url"))
    return Backend(kind, clock, db_path=tmp_path / "polpo.db")
