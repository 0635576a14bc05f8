"""Dependency-graph functions: cycles, order, reverse edges — examples and properties on random graphs."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polpo.mission.graph import dependents, find_cycle, topological_order, transitive_dependents

Edges = dict[str, list[str]]


def test_no_cycle_in_a_dag() -> None:
    assert find_cycle({"A": ["B", "C"], "B": ["C"], "C": []}) is None


def test_three_cycle_is_returned_closed_and_in_insertion_order() -> None:
    assert find_cycle({"A": ["B"], "B": ["C"], "C": ["A"], "D": ["A"]}) == ["A", "B", "C", "A"]
    assert find_cycle({"D": ["A"], "A": ["B"], "B": ["C"], "C": ["A"]}) == ["A", "B", "C", "A"]


def test_self_loop_is_a_cycle() -> None:
    assert find_cycle({"A": [], "B": ["B"]}) == ["B", "B"]


def test_targets_without_entries_have_no_edges() -> None:
    assert find_cycle({"A": ["X", "Y"], "B": ["X"]}) is None


def test_long_chain_and_long_ring_do_not_recurse() -> None:
    n = 10_000
    chain = {f"t{i}": [f"t{i - 1}"] if i else [] for i in range(n)}
    assert find_cycle(chain) is None
    assert topological_order(list(chain), chain) == [f"t{i}" for i in range(n)]
    ring = {f"t{i}": [f"t{(i + 1) % n}"] for i in range(n)}
    cycle = find_cycle(ring)
    assert cycle is not None and len(cycle) == n + 1 and cycle[0] == cycle[-1] == "t0"


def test_topological_order_keeps_input_order_among_ready_nodes() -> None:
    assert topological_order(["A", "B", "C"], {"A": ["C"]}) == ["B", "C", "A"]
    assert topological_order(["A", "B", "C"], {}) == ["A", "B", "C"]


def test_topological_order_ignores_edges_to_unknown_nodes_and_rejects_cycles() -> None:
    assert topological_order(["A", "B"], {"A": ["Z"], "B": ["A"]}) == ["A", "B"]
    with pytest.raises(ValueError, match="cycle: A → B → A"):
        topological_order(["A", "B", "C"], {"A": ["B"], "B": ["A"]})


def test_dependents_and_transitive_dependents() -> None:
    edges = {"A": [], "B": ["A"], "C": ["B", "A"], "D": ["C"], "E": []}
    rev = dependents(edges)
    assert rev == {"A": ["B", "C"], "B": ["C"], "C": ["D"], "D": [], "E": []}
    assert transitive_dependents("A", rev) == ["B", "C", "D"]
    assert transitive_dependents("D", rev) == []
    assert transitive_dependents("unknown", rev) == []


# ------------------------------------------------------------------------------------------- properties


@st.composite
def dags(draw: st.DrawFn) -> tuple[list[str], Edges]:
    """Random DAG: node i may only depend on nodes created before it; then the node order is shuffled."""
    n = draw(st.integers(0, 30))
    names = [f"n{i}" for i in range(n)]
    edges: Edges = {}
    for i, name in enumerate(names):
        edges[name] = draw(st.lists(st.sampled_from(names[:i]), max_size=4)) if i else []
    order = draw(st.permutations(names))
    return list(order), {k: edges[k] for k in order}


@st.composite
def graphs_with_a_cycle(draw: st.DrawFn) -> Edges:
    """A random DAG plus a ring over some of its nodes (a self-loop when the ring has one node)."""
    order, edges = draw(dags().filter(lambda d: len(d[0]) > 0))
    ring = draw(st.lists(st.sampled_from(order), min_size=1, max_size=6, unique=True))
    for a, b in zip(ring, ring[1:] + ring[:1], strict=True):
        edges[a] = [*edges[a], b]
    return edges


@given(dags())
def test_random_dags_have_no_cycle_and_order_respects_edges(dag: tuple[list[str], Edges]) -> None:
    order, edges = dag
    assert find_cycle(edges) is None
    topo = topological_order(order, edges)
    assert sorted(topo) == sorted(order)
    pos = {n: i for i, n in enumerate(topo)}
    assert all(pos[d] < pos[n] for n, deps in edges.items() for d in deps)


@given(graphs_with_a_cycle())
def test_a_found_cycle_is_a_real_cycle_of_the_graph(edges: Edges) -> None:
    cycle = find_cycle(edges)
    assert cycle is not None and len(cycle) >= 2 and cycle[0] == cycle[-1]
    assert len(set(cycle[:-1])) == len(cycle) - 1
    assert all(b in edges[a] for a, b in itertools.pairwise(cycle))
    assert find_cycle(edges) == cycle  # deterministic
    with pytest.raises(ValueError, match="cycle"):
        topological_order(list(edges), edges)


@given(
    st.dictionaries(st.sampled_from("ABCDEFG"), st.lists(st.sampled_from("ABCDEFG"), max_size=3), max_size=7)
)
def test_cycle_found_exactly_when_no_order_exists(edges: Edges) -> None:
    nodes = sorted({*edges, *(d for ds in edges.values() for d in ds)})
    try:
        topological_order(nodes, edges)
        ordered = True
    except ValueError:
        ordered = False
    assert (find_cycle(edges) is None) == ordered


@given(dags(), st.data())
def test_transitive_dependents_are_exactly_the_nodes_that_reach_it(
    dag: tuple[list[str], Edges], data: st.DataObject
) -> None:
    order, edges = dag
    if not order:
        return
    node = data.draw(st.sampled_from(order))
    reach = set(transitive_dependents(node, dependents(edges)))

    def reaches(src: str) -> bool:
        stack, seen = [src], {src}
        while stack:
            for d in edges.get(stack.pop(), []):
                if d == node:
                    return True
                if d not in seen:
                    seen.add(d)
                    stack.append(d)
        return False

    assert reach == {n for n in order if n != node and reaches(n)}
