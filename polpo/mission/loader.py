"""Mission file bytes → a validated ``MissionSpec``, or every problem at once with its JSON path.

Field errors come from pydantic; the checks that need the whole document (unique titles, references to tasks
and agents, dependency cycles including the waits that quality gates add) run on the raw JSON next to them,
defensively, so one run reports everything a person has to fix. Linear in the size of the document.

Before any of that, :mod:`polpo.mission.jsonbytes` refuses what no later stage can carry (bad encodings, NUL,
lone surrogates, huge numbers, deep nesting, too many values). Every problem's path and message is made
UTF-8-safe, so a rejection can always be stored and logged.
"""

from __future__ import annotations

import collections.abc
import json
import re
import types
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from polpo.docmodel import Model
from polpo.mission.crosscheck import CrossChecker
from polpo.mission.jsonbytes import carryable, parse, unsafe_values
from polpo.mission.notifications import notification_warnings
from polpo.mission.rawdoc import Loc, Suggester, as_list, get, name_of, sort_key
from polpo.mission.schema import (
    EXPECTATION_TYPES,
    MissionSettings,
    MissionSpec,
    QualityGate,
    TaskSpec,
    TeamAgent,
)
from polpo.mission.templates import is_template, leftover_placeholders, template_rejection

_IGNORED = "Polpo field not implemented by polpo; ignored"


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
    data, problem, duplicates = parse(raw)
    if problem is not None:
        return LoadResult(None, [_carryable_problem(Problem("$", problem))], [])
    unsafe = unsafe_values(data)
    if unsafe:  # nothing downstream may see these values, so they are the whole answer
        return LoadResult(None, [_carryable_problem(Problem(json_path(loc), msg)) for loc, msg in unsafe], [])
    if not isinstance(data, dict):
        return LoadResult(None, [Problem("$", 'the top level must be a JSON object with a "tasks" list')], [])
    if is_template(data):
        return LoadResult(None, [Problem("$", template_rejection(data))], [])
    found = duplicates + (leftover_placeholders(data) if b"{{" in raw or b"\\u" in raw else [])
    suggest = Suggester()
    spec: MissionSpec | None = None
    try:
        spec = MissionSpec.model_validate(data, strict=True)  # JSON types as written: no "2" → 2
    except ValidationError as e:
        found.extend(_from_pydantic(e, data, suggest))
    checker = CrossChecker(data, known_agents, suggest)
    found.extend(checker.run())
    warnings = [carryable(w) for w in _warnings(data, known_agents)
                + [f"{json_path(loc)}: {msg}" for loc, msg in notification_warnings(data)]]
    if not found:
        assert spec is not None
        return LoadResult(_gates_by_title(spec, checker.id_refs), [], warnings)
    unique = dict.fromkeys((loc, msg) for loc, msg in sorted(found, key=lambda p: sort_key(p[0])))
    return LoadResult(None, [_carryable_problem(Problem(json_path(loc), msg)) for loc, msg in unique], warnings)


def _carryable_problem(p: Problem) -> Problem:
    return Problem(carryable(p.path), carryable(p.message))


def _gates_by_title(spec: MissionSpec, id_refs: dict[str, str]) -> MissionSpec:
    """Gates, checkpoints and delays that named tasks by id, rewritten to name them by title (what the engine
    matches on)."""
    if not id_refs:
        return spec
    update = {key: [g.model_copy(update={"after_tasks": [id_refs.get(t, t) for t in g.after_tasks],
                                         "blocks_tasks": [id_refs.get(t, t) for t in g.blocks_tasks]})
                    for g in getattr(spec, key)]
              for key in ("quality_gates", "checkpoints", "delays")}
    return spec.model_copy(update=update)


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


# ------------------------------------------------------------------------------------------ field errors


def _from_pydantic(err: ValidationError, data: dict[str, Any], suggest: Suggester) -> Iterator[tuple[Loc, str]]:
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
    """Drop the labels pydantic puts in ``loc`` for union members (the expectation ``type`` tag and others; a
    discriminated field's tag, even where the value is a list, which no key can index)."""
    out: list[str | int] = []
    node: Any = data
    for i, seg in enumerate(loc):
        if isinstance(seg, str) and isinstance(node, list) and i < len(loc) - 1:
            continue
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
            if isinstance(seg, int) and get_origin(c) in (list, collections.abc.Sequence):
                nxt = get_args(c)[0]
            elif isinstance(seg, str) and isinstance(c, type) and issubclass(c, BaseModel):
                f = next((f for n, f in c.model_fields.items() if seg in (n, f.alias)), None)
                if f is not None:
                    nxt = f.annotation
                elif "type" in c.model_fields and get_args(c.model_fields["type"].annotation) == (seg,):
                    nxt = c  # a discriminated-union tag
            if nxt is not None:
                break
        if nxt is None and isinstance(seg, str):
            continue  # no field of that name: a union member's label (a discriminator's tag), not a key
        if nxt is None:
            return None
        cur = nxt
    return next((c for c in _flatten(cur) if isinstance(c, type) and issubclass(c, BaseModel)), None)


def _keys_of(model: type[BaseModel] | None) -> list[str]:
    if model is None:
        return []
    keys = [f.alias or n for n, f in model.model_fields.items()]
    return keys + sorted(model.TOLERATED) if issubclass(model, Model) else keys


# ------------------------------------------------------------------------------------------------ warnings

_TOLERANT_PLACES: tuple[tuple[str | None, bool, type[Model]], ...] = (
    (None, False, MissionSpec), ("settings", False, MissionSettings), ("tasks", True, TaskSpec),
    ("team", True, TeamAgent), ("qualityGates", True, QualityGate))


def _warnings(data: dict[str, Any], known_agents: Collection[str] | None) -> list[str]:
    """One warning per tolerated Polpo key present, and per team agent that hides a configured one."""
    out: list[str] = []
    for place, many, model in _TOLERANT_PLACES:
        key, value = (None, data) if place is None else get(data, place)
        objs = list(enumerate(as_list(value))) if many else [(None, value)]
        for i, obj in objs:
            if not isinstance(obj, dict):
                continue
            base: Loc = () if key is None else (key,) if i is None else (key, i)
            out.extend(f"{json_path((*base, k))}: {_IGNORED}"
                       for k in obj if isinstance(k, str) and model.is_tolerated(k))
    if known_agents:
        team_key, team = get(data, "team")
        for i, agent in enumerate(as_list(team)):
            key, name = get(agent, "name")
            if (n := name_of(name)) is not None and n in known_agents:
                out.append(f'{json_path((team_key, i, key))}: team agent "{n}" is used instead of the configured '
                           "agent of the same name in this mission")
    return out



__all__ = ["LoadResult", "Problem", "format_problems", "json_path", "load_mission"]
