"""A scheduled mission on two real daemons sharing one PostgreSQL database: only the leader fires. A leader whose
term is ended at the database stays up but stops firing at once; after a kill -9 of the leader the other node goes on
from the stored cursor. No instant is fired twice, by either node."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.cluster import END_LEADER_TERM, Cluster, cluster_on
from tests.support.postgres import PgCluster

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(postgres_cluster: PgCluster) -> Iterator[tuple[Cluster, PgCluster, str]]:
    with cluster_on(postgres_cluster, "schedules") as c:
        yield c


def fired(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in evs if e["event"] == "schedule:triggered"]


def leaders(evs: list[dict[str, Any]]) -> list[str]:
    return [e["node"] for e in evs if e["event"] == "cluster:leader"]


def test_only_the_leader_fires_across_a_deposition_and_a_kill_9(cluster: tuple[Cluster, PgCluster, str]) -> None:
    c, pg, db = cluster
    for name in ("a", "b"):
        c.add(name, lease=2)
        c.start(name)
    c.wait("a", lambda evs: len(leaders(evs)) == 1, 30)
    (c.missions / "tick.json").write_text(json.dumps({
        "name": "tick", "schedule": "PT2S", "catchUp": "all", "workspace": str(c.shared / "tick"),
        "settings": {"affinity": "any"}, "tasks": [{"title": "t", "assignTo": "shell", "description": "true"}]}))
    c.wait("a", lambda evs: len(fired(evs)) >= 2, 60)
    # the leader's term ends at the database: it is deposed but stays up (and may be elected again)
    assert pg.psql(END_LEADER_TERM, db).strip() == "1"
    evs = c.wait("a", lambda evs: len(leaders(evs)) >= 2, 30)
    seen = len(fired(evs))
    evs = c.wait("a", lambda evs: len(fired(evs)) >= seen + 2 or twice(evs), 60)
    assert not twice(evs), [e["data"]["scheduledFor"] for e in fired(evs)]
    current = leaders(evs)[-1]
    other = "b" if current == "a" else "a"
    c.kill(current)
    evs = c.wait(other, lambda evs: twice(evs) or (leaders(evs)[-1:] == [other] and len(
        [e for e in fired(evs) if e["node"] == other and e["seq"] > seq_of_kill(evs, other)]) >= 2), 90)
    got = fired(evs)
    instants = [e["data"]["scheduledFor"] for e in got]
    assert len(set(instants)) == len(instants), instants  # never twice, by either node
    assert len({e["missionId"] for e in got}) == len(got)
    assert all(node.proc is None or node.proc.poll() is None for node in c.nodes.values())


def twice(evs: list[dict[str, Any]]) -> bool:
    """An instant fired more than once (by one node or two)."""
    instants = [e["data"]["scheduledFor"] for e in fired(evs)]
    return len(set(instants)) != len(instants)


def seq_of_kill(evs: list[dict[str, Any]], other: str) -> int:
    """The seq of the election of ``other`` after the kill (its firings after it)."""
    return max((e["seq"] for e in evs if e["event"] == "cluster:leader" and e["node"] == other), default=0)
