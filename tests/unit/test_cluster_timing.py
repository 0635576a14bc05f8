"""The cluster's clocks (polpo.store.cluster.timing) and the fence's statement (polpo.store.fencing): pure rules."""

from __future__ import annotations

import pytest

from polpo.store.cluster.timing import GUARD_DEADLINE, GUARD_POLL, RENEW, SELF_STOP, TAKE_AFTER, must_stop
from polpo.store.fencing import Fence, Fenced
from polpo.tools.guard import gather_for


def test_the_margins_nest_a_node_stops_and_its_guard_kills_before_anyone_takes_over() -> None:
    assert GUARD_DEADLINE < SELF_STOP < 1 < TAKE_AFTER
    # the guard's kill, after the last renewal's beat, a look at its deadline and its gather (for a 1 s lease)
    assert RENEW + GUARD_DEADLINE + GUARD_POLL + gather_for(GUARD_DEADLINE * 1.0) < TAKE_AFTER
    assert RENEW * 3 <= SELF_STOP  # three renewals may fail before a node stops


def test_a_node_may_act_while_it_renews_and_beats() -> None:
    assert must_stop(renewed=100.0, beaten=100.9, at=101.0, lease=2.0) is None


def test_a_node_stops_when_no_renewal_succeeded_for_two_thirds_of_the_lease() -> None:
    why = must_stop(renewed=100.0, beaten=101.3, at=101.34, lease=2.0)
    assert why is not None and "no heartbeat renewed" in why


def test_a_node_stops_when_it_did_not_run_longer_than_its_guards_deadline() -> None:
    why = must_stop(renewed=100.0, beaten=100.0, at=101.1, lease=30.0)  # fresh lease, but a 1.1 s gap (> 1 s)
    assert why is None
    why = must_stop(renewed=100.0, beaten=100.0, at=101.1, lease=2.0)
    assert why is not None and "guard may have killed" in why


def test_the_fence_statement_quotes_its_values_and_names_the_leader() -> None:
    f = Fence("it's\\node", "abc", 2.0)
    assert f.call() == "SELECT polpo_fence(E'it\\'s\\\\node', E'abc', 2.0::float8, NULL)"
    assert f.call(4242).endswith(", 4242::int8)")


def test_a_fence_trips_once_and_then_refuses_everything() -> None:
    heard: list[str] = []
    f = Fence("n", "i", 2.0, on_fenced=[heard.append])
    err = f.trip("lease gone")
    assert isinstance(err, Fenced) and heard == ["lease gone"]
    f.trip("again")
    assert heard == ["lease gone"] and f.fenced == "lease gone"
    with pytest.raises(Fenced, match="lease gone"):
        f.ensure()


def test_a_node_that_left_refuses_later_writes_without_taking_them_for_a_lost_lease() -> None:
    """Seed 12466: after a clean stop's leave, the database refuses a late write (the row is gone); the node must
    not take that for a lost lease (its listeners stop it with exit 1), and its own clock no longer matters."""
    heard: list[str] = []
    f = Fence("n", "i", 2.0, on_fenced=[heard.append], local=lambda: "paused")
    f.leave()
    with pytest.raises(Fenced, match="left the cluster"):
        f.ensure()
    f.trip("node n (incarnation i) no longer holds its lease")  # the database's refusal of a write under way
    assert heard == []


def test_the_nodes_own_clock_fences_it_before_any_transaction() -> None:
    f = Fence("n", "i", 2.0, local=lambda: "paused")
    with pytest.raises(Fenced, match="paused"):
        f.ensure()
    assert f.fenced == "paused"
