"""The checks that need the whole mission document: unique titles and names, references to tasks and agents,
dependency cycles including the waits that quality gates add. Over the raw JSON, linear in its size.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection
from typing import Any

from polpo.mission.graph import find_cycle
from polpo.mission.rawdoc import Loc, Suggester, as_list, get, name_of
from polpo.review.keys import dim_key

__all__ = ["CrossChecker"]

_TASK_ID = re.compile(r"(?:.+:)?(\d+)")
# the elements that make tasks wait for others: (their list's key, what an error calls one)
_WAITERS = (("qualityGates", "gate"), ("checkpoints", "checkpoint"), ("delays", "delay"))


class CrossChecker:
    """Whole-document checks over the raw JSON; every method skips parts with the wrong shape."""

    def __init__(self, data: dict[str, Any], known_agents: Collection[str] | None, suggest: Suggester) -> None:
        self.data = data
        self.suggest = suggest
        self.known = None if known_agents is None else list(known_agents)
        self.found: list[tuple[Loc, str]] = []
        self.tasks = as_list(get(data, "tasks")[1])
        self.titles: dict[str, int] = {}  # title → index of the first task with it
        self.id_refs: dict[str, str] = {}  # a gate's task id reference → the title it names
        self.edges: dict[str, list[str]] = {}  # title → what it waits for (dependsOn + gates)
        self.dep_key: dict[str, tuple[int, str]] = {}  # title → (task index, its dependsOn key)
        self.declared: dict[str, set[str]] = {}  # title → its own (valid) dependsOn
        # an edge a gate, checkpoint or delay made → (its list's key, its index); and what to call it
        self.gate_of: dict[tuple[str, str], tuple[str, int]] = {}
        self.gate_names: dict[tuple[str, int], str] = {}

    def run(self) -> list[tuple[Loc, str]]:
        self._titles()
        self._agents()
        self._depends_on()
        self._gates()
        self._cycle()
        self._dimensions()
        return self.found

    def _dimensions(self) -> None:
        """Dimension names of an llm_review must be unique (scores are matched to dimensions by name)."""
        for i, task in enumerate(self.tasks):
            exp_key, exps = get(task, "expectations")
            places: list[tuple[tuple[str | int, ...], Any]] = [
                ((exp_key, j), exp) for j, exp in enumerate(as_list(exps))]
            tiers_key, tiers = get(task, "tiers")
            for t, tier in enumerate(as_list(tiers)):
                key, texps = get(tier, "expectations")
                places += [((tiers_key, t, key, j), exp) for j, exp in enumerate(as_list(texps))]
            for where, exp in places:
                dims_key, dims = get(exp, "dimensions")
                seen: dict[str, int] = {}
                named: list[str] = []
                for k, dim in enumerate(as_list(dims)):
                    name_key, name = get(dim, "name")
                    n = name_of(name)
                    if n is None:
                        continue
                    named.append(n)
                    norm = dim_key(n)
                    if norm in seen:
                        self.found.append(((("tasks", i, *where, dims_key, k, name_key)),
                                           f'duplicate dimension "{n}" (first at dimensions[{seen[norm]}])'))
                    else:
                        seen[norm] = k
                if named:
                    self._checklist(("tasks", i, *where), exp, named)

    def _checklist(self, where: tuple[str | int, ...], exp: Any, dims: list[str]) -> None:
        """With dimensions given, each checklist question must name the one it scores (matched as scores are)."""
        listed = ", ".join(dims)
        known = {dim_key(d) for d in dims}
        key, items = get(exp, "checklist")
        for k, item in enumerate(as_list(items)):
            dim_at, dim = get(item, "dimension")
            n = name_of(dim)
            if isinstance(item, str) or (isinstance(item, dict) and dim is None):
                self.found.append(((*where, key, k), f'with dimensions given, say which one the question scores '
                                                     f'(write it as {{"question": …, "dimension": one of {listed}}})'))
            elif n is not None and dim_key(n) not in known:
                self.found.append(((*where, key, k, dim_at), f'"{n}" is not one of the dimensions ({listed})'))

    def _titles(self) -> None:
        for i, task in enumerate(self.tasks):
            key, title = get(task, "title")
            t = name_of(title)
            if t is None:
                continue
            if t in self.titles:
                self.found.append((("tasks", i, key),
                                   f'duplicate title "{t}" (first used at $.tasks[{self.titles[t]}])'))
            else:
                self.titles[t] = i
                self.edges[t] = []

    def _agents(self) -> None:
        team_key, team = get(self.data, "team")
        names: dict[str, int] = {}
        for i, agent in enumerate(as_list(team)):
            key, name = get(agent, "name")
            n = name_of(name)
            if n is None:
                continue
            if n in names:
                self.found.append(((team_key, i, key), f'duplicate agent name "{n}" (first used at $.team[{names[n]}])'))
            else:
                names[n] = i
        available = list(dict.fromkeys([*names, *(self.known or ())]))
        listing = ", ".join(available) or "none"
        for i, task in enumerate(self.tasks):
            if not isinstance(task, dict):
                continue
            key, agent = get(task, "assignTo")
            if agent is None:
                # ambiguous for sure with two team agents, even when the daemon's agents are not known
                if (self.known is not None and len(available) != 1) or len(names) > 1:
                    why = ("no agent is available: define one in team or in the daemon config" if not available
                           else f"assignTo is required when more than one agent is available ({listing})")
                    self.found.append((("tasks", i), why))
            elif self.known is not None and (a := name_of(agent)) is not None and a not in available:
                self.found.append((("tasks", i, key), f'no agent named "{a}"; available: {listing}'
                                   + self.suggest(a, available)))
            rp_key, policy = get(task, "retryPolicy")
            fb_key, fallback = get(policy, "fallbackAgent")
            if self.known is not None and (f := name_of(fallback)) is not None and f not in available:
                self.found.append((("tasks", i, rp_key, fb_key), f'no agent named "{f}"; available: {listing}'
                                   + self.suggest(f, available)))

    def _task_ref(self, loc: Loc, v: Any) -> str | None:
        """A gate's task reference: a title, or a task id (``MISSION:N`` or ``N``, N counting from 1)."""
        t = name_of(v)
        if t is None:
            return None
        if t in self.titles:
            return t
        by_id = _TASK_ID.fullmatch(t)
        if by_id is not None and 1 <= int(by_id.group(1)) <= len(self.tasks):
            title = name_of(get(self.tasks[int(by_id.group(1)) - 1], "title")[1])
            if title is not None:
                self.id_refs[t] = title
                return title
        self.found.append((loc, f'no task titled "{t}"' + self.suggest(t, self.titles)))
        return None

    def _depends_on(self) -> None:
        for i, task in enumerate(self.tasks):
            key, deps = get(task, "dependsOn")
            title = name_of(get(task, "title")[1])
            first = title is not None and self.titles.get(title) == i
            if title is not None and first:
                self.dep_key[title] = (i, key)
                self.declared[title] = set()
            for j, d in enumerate(as_list(deps)):
                if title is not None and name_of(d) == title:
                    self.found.append((("tasks", i, key, j), "a task cannot depend on itself"))
                    continue
                t = self._task_ref(("tasks", i, key, j), d)
                if t is not None and title is not None and first and t not in self.declared[title]:
                    self.declared[title].add(t)
                    self.edges[title].append(t)

    def _gates(self) -> None:
        """Quality gates, checkpoints and delays: each names tasks (titles or ids) and makes its blocksTasks wait
        for every afterTask, so its waits count toward cycles like dependsOn does."""
        for key, what in _WAITERS:
            self._waiter(key, what)

    def _waiter(self, key: str, what: str) -> None:
        gates_key, gates = get(self.data, key)
        names: dict[str, int] = {}
        for g, gate in enumerate(as_list(gates)):
            name_key, name = get(gate, "name")
            n = name_of(name)
            if n is not None and n in names:
                self.found.append(((gates_key, g, name_key),
                                   f'duplicate {what} name "{n}" (first used at $.{key}[{names[n]}])'))
            elif n is not None:
                names[n] = g
            self.gate_names[(gates_key, g)] = f'{what} "{n or f"#{g + 1}"}"'
            after_key, after = get(gate, "afterTasks")
            blocks_key, blocks = get(gate, "blocksTasks")
            waits = [t for j, v in enumerate(as_list(after))
                     if (t := self._task_ref((gates_key, g, after_key, j), v)) is not None]
            waits_set = set(waits)
            for j, v in enumerate(as_list(blocks)):
                b = self._task_ref((gates_key, g, blocks_key, j), v)
                if b is None:
                    continue
                if b in waits_set:
                    self.found.append(((gates_key, g, blocks_key, j),
                                       f'"{b}" is also in afterTasks: a {what} cannot block a task it waits for'))
                    continue
                for a in waits:  # each blocked task waits for every afterTask
                    if (b, a) not in self.gate_of and a not in self.declared[b]:
                        self.gate_of[(b, a)] = (gates_key, g)
                        self.edges[b].append(a)

    def _cycle(self) -> None:
        cycle = find_cycle(self.edges)
        if cycle is None:
            return
        nodes = cycle[:-1]
        start = min(range(len(nodes)), key=lambda k: self.titles[nodes[k]])
        nodes = nodes[start:] + nodes[:start]
        ring = [*nodes, nodes[0]]
        via: list[str] = []
        for a, b in itertools.pairwise(ring):
            if b not in self.declared[a]:
                via.append(f'{self.gate_names[self.gate_of[(a, b)]]} makes "{a}" wait for "{b}"')
        a, b = ring[0], ring[1]
        loc: Loc = (("tasks", *self.dep_key[a]) if b in self.declared[a] else self.gate_of[(a, b)])
        self.found.append((loc, "dependency cycle: " + " → ".join(ring) + (f" ({'; '.join(via)})" if via else "")))
