"""Dependency-graph functions over plain mappings: pure, deterministic, iterative.

``edges`` maps a node to the nodes it depends on (``task → its dependsOn``). Everything iterates in insertion
order so the same document always gives the same answer, and nothing recurses, so a 10 000-task chain is fine.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Mapping

_WHITE, _GREY, _BLACK = 0, 1, 2


def find_cycle(edges: Mapping[str, Iterable[str]]) -> list[str] | None:
    """A cycle as ``[a, b, …, a]`` (``a`` depends on ``b`` …), or None when the graph is acyclic.

    Depth-first search with an explicit stack; nodes that only appear as targets have no outgoing edges.
    """
    adj = {n: list(dict.fromkeys(deps)) for n, deps in edges.items()}
    color: dict[str, int] = {}
    for root in adj:
        if color.get(root, _WHITE) != _WHITE:
            continue
        path: list[str] = [root]  # the grey nodes, in order
        on_path: dict[str, int] = {root: 0}
        stack: list[tuple[str, int]] = [(root, 0)]  # (node, index of the next neighbour to try)
        color[root] = _GREY
        while stack:
            node, i = stack[-1]
            nbrs = adj.get(node, ())
            if i < len(nbrs):
                stack[-1] = (node, i + 1)
                nxt = nbrs[i]
                state = color.get(nxt, _WHITE)
                if state == _GREY:
                    return [*path[on_path[nxt]:], nxt]
                if state == _WHITE:
                    color[nxt] = _GREY
                    on_path[nxt] = len(path)
                    path.append(nxt)
                    stack.append((nxt, 0))
            else:
                stack.pop()
                color[node] = _BLACK
                del on_path[path.pop()]
    return None


def topological_order(nodes: Iterable[str], edges: Mapping[str, Iterable[str]]) -> list[str]:
    """``nodes`` with every dependency before its dependents; ties keep input order. ValueError on a cycle.

    Kahn's algorithm with the input index as priority. Edges to nodes outside ``nodes`` are ignored.
    """
    order = list(dict.fromkeys(nodes))
    index = {n: i for i, n in enumerate(order)}
    waiting = [0] * len(order)
    rev: list[list[int]] = [[] for _ in order]
    for n in order:
        for dep in dict.fromkeys(edges.get(n, ())):
            j = index.get(dep)
            if j is not None:
                waiting[index[n]] += 1
                rev[j].append(index[n])
    ready = [i for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    out: list[str] = []
    while ready:
        i = heapq.heappop(ready)
        out.append(order[i])
        for k in rev[i]:
            waiting[k] -= 1
            if waiting[k] == 0:
                heapq.heappush(ready, k)
    if len(out) < len(order):
        rest = {n: [d for d in edges.get(n, ()) if d in index] for n in order if waiting[index[n]]}
        cycle = find_cycle(rest)
        raise ValueError("dependency cycle: " + " → ".join(cycle or rest))
    return out


def dependents(edges: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """Reverse edges: node → the nodes that depend on it. Every node seen (key or target) gets an entry."""
    rev: dict[str, dict[str, None]] = {}
    for n, deps in edges.items():
        rev.setdefault(n, {})
        for d in deps:
            rev.setdefault(d, {})[n] = None
    return {n: list(ds) for n, ds in rev.items()}


def transitive_dependents(node: str, reverse_edges: Mapping[str, Iterable[str]]) -> list[str]:
    """Everything that (directly or not) depends on ``node``, breadth-first, without ``node`` itself.

    Used to know what a failed task makes unreachable.
    """
    seen = {node}
    out: list[str] = []
    queue = deque([node])
    while queue:
        for d in reverse_edges.get(queue.popleft(), ()):
            if d not in seen:
                seen.add(d)
                out.append(d)
                queue.append(d)
    return out


__all__ = ["dependents", "find_cycle", "topological_order", "transitive_dependents"]
