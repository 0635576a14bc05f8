"""Mission file bytes → a validated ``MissionSpec``, or every problem at once with its JSON path.

Field errors come from pydantic; the checks that need the whole document (unique titles, references to tasks
and agents, dependency cycles including the waits that quality gates add) run on the raw JSON next to them,
defensively, so one run reports everything a person has to fix. Linear in the size of the document.

Before any of that, the parse step refuses what no later stage can carry: text that is not UTF-8 (a UTF-8
byte-order mark is dropped, here and in the watcher alike), NUL characters and lone surrogates in any string
(argv, file names, SQLite and UTF-8 JSON cannot hold them), whole numbers beyond ±2^53 and numbers too large
for a double (orjson and SQLite stop at 64 bits), nesting deeper than :data:`MAX_DEPTH`, and more than
:data:`MAX_ENTRIES` in one list or object or :data:`MAX_VALUES` in the document (so the validation's work
and memory stay bounded: 300 000 bad items would otherwise make 300 000 errors). Every problem's path and
message is made UTF-8-safe, so a rejection can always be stored and logged.
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
import re
import types
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_snake

from polpo.docmodel import Model
from polpo.mission.graph import find_cycle
from polpo.mission.schema import (
    EXPECTATION_TYPES,
    MissionSettings,
    MissionSpec,
    QualityGate,
    TaskSpec,
    TeamAgent,
)

Loc = tuple[str | int, ...]
_IGNORED = "Polpo field not implemented by polpo; ignored"
_MAX_SUGGESTIONS = 50  # difflib is linear in the candidates: cap it so a broken 10 000-task file stays fast
MAX_DEPTH = 64  # objects and lists nested deeper than this are refused (orjson's own limit is 255)
MAX_SAFE_INT = 2**53  # the largest whole number every JSON reader (JavaScript's included) keeps exactly
MAX_ENTRIES = 10_000  # items of one list, keys of one object (10 000 tasks fit)
MAX_VALUES = 200_000  # values in the whole document: bounds the work (and the errors) of the validation
UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Problem:
    """One reason a mission file is rejected. ``path`` is a JSON path such as ``$.tasks[2].dependsOn[0]``."""

    path: str
    message: str


@dataclass(frozen=True)
class LoadResult:
    spec: MissionSpec | None  # None iff problems
    problems: list[Problem]
    warnings: list[str]  # "<json path>: <reason>", e.g. Polpo fields that are accepted but ignored

    @property
    def ok(self) -> bool:
        return self.spec is not None


def load_mission(raw: bytes, *, known_agents: Collection[str] | None) -> LoadResult:
    """Parse and validate a mission file. ``known_agents`` are the daemon's configured agents (None: unknown,
    so agent references are not checked)."""
    data, problem, duplicates = _parse(raw)
    if problem is not None:
        return LoadResult(None, [_carryable_problem(problem)], [])
    unsafe = _unsafe_values(data)
    if unsafe:  # nothing downstream may see these values, so they are the whole answer
        return LoadResult(None, [_carryable_problem(Problem(json_path(loc), msg)) for loc, msg in unsafe], [])
    if not isinstance(data, dict):
        return LoadResult(None, [Problem("$", 'the top level must be a JSON object with a "tasks" list')], [])
    found = duplicates
    suggest = _Suggester()
    spec: MissionSpec | None = None
    try:
        spec = MissionSpec.model_validate(data, strict=True)  # JSON types as written: no "2" → 2
    except ValidationError as e:
        found.extend(_from_pydantic(e, data, suggest))
    checker = _Checker(data, known_agents, suggest)
    found.extend(checker.run())
    warnings = [carryable(w) for w in _warnings(data, known_agents)]
    if not found:
        assert spec is not None
        return LoadResult(_gates_by_title(spec, checker.id_refs), [], warnings)
    unique = dict.fromkeys((loc, msg) for loc, msg in sorted(found, key=lambda p: _sort_key(p[0])))
    return LoadResult(None, [_carryable_problem(Problem(json_path(loc), msg)) for loc, msg in unique], warnings)


def carryable(text: str) -> str:
    """``text`` that UTF-8, SQLite and argv can carry: NUL and lone surrogates become ``\\x00`` / ``\\udXXX``."""
    if text.isascii() and "\x00" not in text:
        return text
    text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _carryable_problem(p: Problem) -> Problem:
    return Problem(carryable(p.path), carryable(p.message))


_TASK_ID = re.compile(r"(?:.+:)?(\d+)")


def _gates_by_title(spec: MissionSpec, id_refs: dict[str, str]) -> MissionSpec:
    """Gates that named tasks by id, rewritten to name them by title (what the engine matches on)."""
    if not id_refs:
        return spec
    gates = [g.model_copy(update={"after_tasks": [id_refs.get(t, t) for t in g.after_tasks],
                                  "blocks_tasks": [id_refs.get(t, t) for t in g.blocks_tasks]})
             for g in spec.quality_gates]
    return spec.model_copy(update={"quality_gates": gates})


def format_problems(file: str, problems: Sequence[Problem]) -> list[str]:
    """``FILE: $.path: reason`` lines, as ``polpo validate`` prints them."""
    return [f"{file}: {p.path}: {p.message}" for p in problems]


_IDENT = re.compile(r"[A-Za-z_$][\w$-]*")


def json_path(loc: Loc) -> str:
    """``("tasks", 2, "dependsOn")`` → ``$.tasks[2].dependsOn``."""
    parts = ["$"]
    for seg in loc:
        if isinstance(seg, int):
            parts.append(f"[{seg}]")
        elif _IDENT.fullmatch(seg):
            parts.append(f".{seg}")
        else:
            parts.append(f"[{json.dumps(seg, ensure_ascii=False)}]")
    return "".join(parts)


def _sort_key(loc: Loc) -> tuple[tuple[int, int, str], ...]:
    return tuple((0, s, "") if isinstance(s, int) else (1, 0, s) for s in loc)


# ------------------------------------------------------------------------------------------------ parsing

def strip_bom(raw: bytes) -> bytes:
    """The bytes without a leading UTF-8 byte-order mark (editors on Windows add one); the one BOM rule."""
    return raw[len(UTF8_BOM):] if raw.startswith(UTF8_BOM) else raw


_UTF_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
             (b"\xfe\xff", "UTF-16"))


def _parse(raw: bytes) -> tuple[Any, Problem | None, list[tuple[Loc, str]]]:
    """JSON → data, or the one problem that stops everything; plus duplicate keys (JSON keeps the last)."""
    raw = strip_bom(raw)
    if not raw.strip(b" \t\r\n"):
        return None, Problem("$", "file is empty"), []
    for bom, name in _UTF_BOMS:
        if raw.startswith(bom):
            return None, Problem("$", f"not valid JSON: the file is {name} text (it starts with a {name} "
                                      "byte-order mark); save it as UTF-8"), []
    if b"\x00" in raw:
        return None, Problem("$", "not valid JSON: the file contains NUL bytes (UTF-16 or binary data?); "
                                  "save it as UTF-8 text"), []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        return None, Problem("$", f"not valid JSON: not UTF-8 text (line {line}, column {col})"), []
    dupes: dict[int, list[str]] = {}

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)
        if len(obj) < len(items):
            seen: set[str] = set()
            repeated = dupes[id(obj)] = []
            for k, _ in items:
                if k in seen:
                    repeated.append(k)
                seen.add(k)
        return obj

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except json.JSONDecodeError as e:
        return None, Problem("$", f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})"), []
    except RecursionError:
        return None, Problem("$", f"nested too deeply: at most {MAX_DEPTH} levels of objects and lists"), []
    except ValueError as e:
        return None, Problem("$", f"not valid JSON: {e}"), []
    found: list[tuple[Loc, str]] = []
    if dupes:
        for loc, node in _walk(data):
            found.extend(((*loc, key), "duplicate key: JSON keeps only the last value; remove one")
                         for key in dupes.get(id(node), ()))
    return data, None, found


def _unsafe_values(data: Any) -> list[tuple[Loc, str]]:
    """Strings, keys and numbers no later stage can carry, and nesting beyond :data:`MAX_DEPTH`; iterative."""
    found: list[tuple[Loc, str]] = []
    stack: list[tuple[Loc, Any]] = [((), data)]
    seen = 0
    while stack:
        loc, node = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            return [((), f"too many values: at most {MAX_VALUES} strings, numbers, lists and objects in one "
                         "mission file")]
        if isinstance(node, str):
            if (why := _unsafe_text(node)) is not None:
                found.append((loc, why))
        elif isinstance(node, bool) or node is None:
            continue
        elif isinstance(node, int):
            if not -MAX_SAFE_INT <= node <= MAX_SAFE_INT:
                found.append((loc, "number out of range: whole numbers must be between -2^53 and 2^53"))
        elif isinstance(node, float):
            if not math.isfinite(node):
                found.append((loc, "number out of range: too large to be stored"))
        elif isinstance(node, dict | list):
            if len(loc) >= MAX_DEPTH:
                found.append((loc, f"nested too deeply: at most {MAX_DEPTH} levels of objects and lists"))
                continue
            if len(node) > MAX_ENTRIES:
                found.append((loc, f"too many entries ({len(node)}): at most {MAX_ENTRIES} in one "
                                   + ("object" if isinstance(node, dict) else "list")))
                continue
            if isinstance(node, dict):
                for k, v in node.items():
                    if (why := _unsafe_text(k)) is not None:
                        found.append(((*loc, k), "this key " + why.removeprefix("this text ")))
                    stack.append(((*loc, k), v))
            else:
                stack.extend(((*loc, i), v) for i, v in enumerate(node))
    found.sort(key=lambda p: _sort_key(p[0]))
    return found


def _unsafe_text(text: str) -> str | None:
    if text.isascii() and "\x00" not in text:
        return None
    if "\x00" in text:
        return ("this text contains a NUL character (\\u0000), which no command line, file name or database "
                "text can hold; remove it")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return ("this text contains a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape), which is not a "
                "character; write the character itself or a complete surrogate pair")
    return None


def _walk(data: Any) -> Iterator[tuple[Loc, dict[str, Any]]]:
    """Every object in the document with its location; iterative, so deep documents are fine."""
    stack: list[tuple[Loc, Any]] = [((), data)]
    while stack:
        loc, node = stack.pop()
        if isinstance(node, dict):
            yield loc, node
            stack.extend(((*loc, k), v) for k, v in node.items() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend(((*loc, i), v) for i, v in enumerate(node) if isinstance(v, dict | list))


# ------------------------------------------------------------------------------------------ field errors


def _from_pydantic(err: ValidationError, data: dict[str, Any], suggest: _Suggester) -> Iterator[tuple[Loc, str]]:
    for e in err.errors(include_url=False):
        raw_loc = tuple(e["loc"])
        loc = _clean_loc(raw_loc, data)
        kind, ctx = e["type"], e.get("ctx") or {}
        expected = ", ".join(EXPECTATION_TYPES)
        if kind == "missing":
            yield loc, ("required field missing: a mission needs at least one task" if loc == ("tasks",)
                        else "required field missing")
        elif kind == "extra_forbidden":
            yield loc, "unknown key" + suggest(str(raw_loc[-1]), _keys_of(_model_at(raw_loc[:-1])))
        elif kind == "union_tag_invalid":
            yield (*loc, "type"), f"unknown expectation type {json.dumps(ctx.get('tag'))}; use one of: {expected}"
        elif kind == "union_tag_not_found":
            yield (*loc, "type"), f"required field missing; use one of: {expected}"
        elif kind in ("value_error", "assertion_error") and "error" in ctx:
            yield loc, str(ctx["error"])
        elif kind == "too_short":
            yield loc, "a mission needs at least one task" if loc == ("tasks",) else "must list at least one entry"
        elif kind == "string_too_short":
            yield loc, "must not be empty"
        elif kind == "literal_error":
            yield loc, f"must be {ctx.get('expected', 'one of the documented values')}"
        elif kind in _TYPE_NAMES:
            yield loc, f"must be {_TYPE_NAMES[kind]} (got {_json_type(e['input'])})"
        else:
            yield loc, e["msg"][:1].lower() + e["msg"][1:]


_TYPE_NAMES = {
    "model_type": "an object", "model_attributes_type": "an object", "dict_type": "an object",
    "list_type": "a list", "string_type": "a string", "bool_type": "true or false", "bool_parsing": "true or false",
    "int_type": "a whole number", "int_parsing": "a whole number", "int_from_float": "a whole number",
    "float_type": "a number", "float_parsing": "a number",
}


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, int | float):
        return "a number"
    return "a list" if isinstance(v, list) else "an object"


def _clean_loc(loc: Loc, data: Any) -> Loc:
    """Drop the labels pydantic puts in ``loc`` for union members (the expectation ``type`` tag and others)."""
    out: list[str | int] = []
    node: Any = data
    for i, seg in enumerate(loc):
        if isinstance(seg, str) and isinstance(node, dict):
            after_expectations = len(out) >= 2 and out[-2] == "expectations" and isinstance(out[-1], int)
            if (after_expectations and seg in EXPECTATION_TYPES) or (seg not in node and i < len(loc) - 1):
                continue
        out.append(seg)
        try:
            node = node[seg]
        except (KeyError, IndexError, TypeError):
            node = None
    return tuple(out)


def _flatten(tp: Any) -> list[Any]:
    origin = get_origin(tp)
    if origin is Annotated:
        return _flatten(get_args(tp)[0])
    if origin is Union or origin is types.UnionType:
        return [t for a in get_args(tp) for t in _flatten(a)]
    return [] if tp is type(None) else [tp]


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The model validating the object at a (pydantic, tag-bearing) location, to list its keys."""
    cur: Any = MissionSpec
    for seg in loc:
        cands = _flatten(cur)
        nxt: Any = None
        for c in cands:
            if isinstance(seg, int) and get_origin(c) is list:
                nxt = get_args(c)[0]
            elif isinstance(seg, str) and isinstance(c, type) and issubclass(c, BaseModel):
                f = next((f for n, f in c.model_fields.items() if seg in (n, f.alias)), None)
                if f is not None:
                    nxt = f.annotation
                elif "type" in c.model_fields and get_args(c.model_fields["type"].annotation) == (seg,):
                    nxt = c  # a discriminated-union tag
            if nxt is not None:
                break
        if nxt is None:
            return None
        cur = nxt
    return next((c for c in _flatten(cur) if isinstance(c, type) and issubclass(c, BaseModel)), None)


def _keys_of(model: type[BaseModel] | None) -> list[str]:
    if model is None:
        return []
    keys = [f.alias or n for n, f in model.model_fields.items()]
    return keys + sorted(model.TOLERATED) if issubclass(model, Model) else keys


class _Suggester:
    """'; did you mean "x"?' for a misspelt key or name; a budget keeps a badly broken big file linear."""

    def __init__(self) -> None:
        self.budget = _MAX_SUGGESTIONS

    def __call__(self, word: str, choices: Collection[str]) -> str:
        if not choices or self.budget <= 0:
            return ""
        self.budget -= 1
        lowered = {c.lower(): c for c in choices}
        match = lowered.get(word.lower()) or lowered.get(word.replace("_", "").lower())
        if match is None:
            close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
            match = close[0] if close else None
        return f'; did you mean "{match}"?' if match else ""


# ----------------------------------------------------------------------------------------- cross-checks


def _get(obj: Any, camel: str) -> tuple[str, Any]:
    """The key used (camelCase, or snake_case which is accepted too) and its value; value None if absent."""
    if not isinstance(obj, dict):
        return camel, None
    if camel in obj:
        return camel, obj[camel]
    snake = to_snake(camel)
    return (snake, obj[snake]) if snake in obj else (camel, None)


def _name(v: Any) -> str | None:
    """A reference as the schema stores it (stripped); None for anything the field validation reports."""
    return v.strip() or None if isinstance(v, str) else None


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


class _Checker:
    """Whole-document checks over the raw JSON; every method skips parts with the wrong shape."""

    def __init__(self, data: dict[str, Any], known_agents: Collection[str] | None, suggest: _Suggester) -> None:
        self.data = data
        self.suggest = suggest
        self.known = None if known_agents is None else list(known_agents)
        self.found: list[tuple[Loc, str]] = []
        self.tasks = _list(_get(data, "tasks")[1])
        self.titles: dict[str, int] = {}  # title → index of the first task with it
        self.id_refs: dict[str, str] = {}  # a gate's task id reference → the title it names
        self.edges: dict[str, list[str]] = {}  # title → what it waits for (dependsOn + gates)
        self.dep_key: dict[str, tuple[int, str]] = {}  # title → (task index, its dependsOn key)
        self.declared: dict[str, set[str]] = {}  # title → its own (valid) dependsOn
        self.gate_of: dict[tuple[str, str], int] = {}  # gate-made edge → gate index
        self.gate_names: dict[int, str] = {}

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
            exp_key, exps = _get(task, "expectations")
            for j, exp in enumerate(_list(exps)):
                dims_key, dims = _get(exp, "dimensions")
                seen: dict[str, int] = {}
                for k, dim in enumerate(_list(dims)):
                    name_key, name = _get(dim, "name")
                    n = _name(name)
                    if n is None:
                        continue
                    norm = "".join(c for c in n.lower() if c.isalnum())
                    if norm in seen:
                        self.found.append(((("tasks", i, exp_key, j, dims_key, k, name_key)),
                                           f'duplicate dimension "{n}" (first at dimensions[{seen[norm]}])'))
                    else:
                        seen[norm] = k

    def _titles(self) -> None:
        for i, task in enumerate(self.tasks):
            key, title = _get(task, "title")
            t = _name(title)
            if t is None:
                continue
            if t in self.titles:
                self.found.append((("tasks", i, key),
                                   f'duplicate title "{t}" (first used at $.tasks[{self.titles[t]}])'))
            else:
                self.titles[t] = i
                self.edges[t] = []

    def _agents(self) -> None:
        team_key, team = _get(self.data, "team")
        names: dict[str, int] = {}
        for i, agent in enumerate(_list(team)):
            key, name = _get(agent, "name")
            n = _name(name)
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
            key, agent = _get(task, "assignTo")
            if agent is None:
                # ambiguous for sure with two team agents, even when the daemon's agents are not known
                if (self.known is not None and len(available) != 1) or len(names) > 1:
                    why = ("no agent is available: define one in team or in the daemon config" if not available
                           else f"assignTo is required when more than one agent is available ({listing})")
                    self.found.append((("tasks", i), why))
            elif self.known is not None and (a := _name(agent)) is not None and a not in available:
                self.found.append((("tasks", i, key), f'no agent named "{a}"; available: {listing}'
                                   + self.suggest(a, available)))
            rp_key, policy = _get(task, "retryPolicy")
            fb_key, fallback = _get(policy, "fallbackAgent")
            if self.known is not None and (f := _name(fallback)) is not None and f not in available:
                self.found.append((("tasks", i, rp_key, fb_key), f'no agent named "{f}"; available: {listing}'
                                   + self.suggest(f, available)))

    def _task_ref(self, loc: Loc, v: Any) -> str | None:
        """A gate's task reference: a title, or a task id (``MISSION:N`` or ``N``, N counting from 1)."""
        t = _name(v)
        if t is None:
            return None
        if t in self.titles:
            return t
        by_id = _TASK_ID.fullmatch(t)
        if by_id is not None and 1 <= int(by_id.group(1)) <= len(self.tasks):
            title = _name(_get(self.tasks[int(by_id.group(1)) - 1], "title")[1])
            if title is not None:
                self.id_refs[t] = title
                return title
        self.found.append((loc, f'no task titled "{t}"' + self.suggest(t, self.titles)))
        return None

    def _depends_on(self) -> None:
        for i, task in enumerate(self.tasks):
            key, deps = _get(task, "dependsOn")
            title = _name(_get(task, "title")[1])
            first = title is not None and self.titles.get(title) == i
            if title is not None and first:
                self.dep_key[title] = (i, key)
                self.declared[title] = set()
            for j, d in enumerate(_list(deps)):
                if title is not None and _name(d) == title:
                    self.found.append((("tasks", i, key, j), "a task cannot depend on itself"))
                    continue
                t = self._task_ref(("tasks", i, key, j), d)
                if t is not None and title is not None and first and t not in self.declared[title]:
                    self.declared[title].add(t)
                    self.edges[title].append(t)

    def _gates(self) -> None:
        gates_key, gates = _get(self.data, "qualityGates")
        names: dict[str, int] = {}
        for g, gate in enumerate(_list(gates)):
            name_key, name = _get(gate, "name")
            n = _name(name)
            if n is not None and n in names:
                self.found.append(((gates_key, g, name_key),
                                   f'duplicate gate name "{n}" (first used at $.qualityGates[{names[n]}])'))
            elif n is not None:
                names[n] = g
            self.gate_names[g] = n or f"#{g + 1}"
            after_key, after = _get(gate, "afterTasks")
            blocks_key, blocks = _get(gate, "blocksTasks")
            waits = [t for j, v in enumerate(_list(after))
                     if (t := self._task_ref((gates_key, g, after_key, j), v)) is not None]
            waits_set = set(waits)
            for j, v in enumerate(_list(blocks)):
                b = self._task_ref((gates_key, g, blocks_key, j), v)
                if b is None:
                    continue
                if b in waits_set:
                    self.found.append(((gates_key, g, blocks_key, j),
                                       f'"{b}" is also in afterTasks: a gate cannot block a task it waits for'))
                    continue
                for a in waits:  # each blocked task waits for every afterTask
                    if (b, a) not in self.gate_of and a not in self.declared[b]:
                        self.gate_of[(b, a)] = g
                        self.edges[b].append(a)

    def _cycle(self) -> None:
        cycle = find_cycle(self.edges)
        if cycle is None:
            return
        nodes = cycle[:-1]
        start = min(range(len(nodes)), key=lambda k: self.titles[nodes[k]])
        nodes = nodes[start:] + nodes[:start]
        ring = [*nodes, nodes[0]]
        gates_key = _get(self.data, "qualityGates")[0]
        via: list[str] = []
        for a, b in itertools.pairwise(ring):
            if b not in self.declared[a]:
                via.append(f'gate "{self.gate_names[self.gate_of[(a, b)]]}" makes "{a}" wait for "{b}"')
        a, b = ring[0], ring[1]
        loc: Loc = (("tasks", *self.dep_key[a]) if b in self.declared[a]
                    else (gates_key, self.gate_of[(a, b)]))
        self.found.append((loc, "dependency cycle: " + " → ".join(ring) + (f" ({'; '.join(via)})" if via else "")))


# ------------------------------------------------------------------------------------------------ warnings

_TOLERANT_PLACES: tuple[tuple[str | None, bool, type[Model]], ...] = (
    (None, False, MissionSpec), ("settings", False, MissionSettings), ("tasks", True, TaskSpec),
    ("team", True, TeamAgent), ("qualityGates", True, QualityGate))


def _warnings(data: dict[str, Any], known_agents: Collection[str] | None) -> list[str]:
    """One warning per tolerated Polpo key present, and per team agent that hides a configured one."""
    out: list[str] = []
    for place, many, model in _TOLERANT_PLACES:
        key, value = (None, data) if place is None else _get(data, place)
        objs = list(enumerate(_list(value))) if many else [(None, value)]
        for i, obj in objs:
            if not isinstance(obj, dict):
                continue
            base: Loc = () if key is None else (key,) if i is None else (key, i)
            out.extend(f"{json_path((*base, k))}: {_IGNORED}"
                       for k in obj if isinstance(k, str) and model.is_tolerated(k))
    if known_agents:
        team_key, team = _get(data, "team")
        for i, agent in enumerate(_list(team)):
            key, name = _get(agent, "name")
            if (n := _name(name)) is not None and n in known_agents:
                out.append(f'{json_path((team_key, i, key))}: team agent "{n}" is used instead of the configured '
                           "agent of the same name in this mission")
    return out


__all__ = ["MAX_DEPTH", "MAX_ENTRIES", "MAX_SAFE_INT", "MAX_VALUES", "LoadResult", "Problem", "carryable", "format_problems", "json_path",
           "load_mission", "strip_bom"]
