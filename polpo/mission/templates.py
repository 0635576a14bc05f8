"""Polpo workflow and playbook templates: a mission document with ``{{name}}`` placeholders and parameters.

A template is ``{"name", "description"?, "parameters": [...], "plan": {…mission…}}`` (Polpo's workflows) or
the same with ``"mission"`` (Polpo's playbooks; an object or the JSON text of one). A parameter is
``{"name", "description"?, "type"?: "string" | "number" | "boolean", "required"?, "default"?, "enum"?}``.

Filling is JSON-aware: placeholders (``{{name}}`` or ``{{ name }}``) are replaced inside the strings of the
parsed document, never in its text, so a value with quotes or newlines cannot break the JSON. A value goes in
as text (a number as typed, ``1200.50``; a boolean as ``true``/``false``), except when the placeholder is the
whole string (``"{{depth}}"``) and the parameter is a number or a boolean: then the string becomes that JSON
value (``5``), which is what a numeric field needs. ``--param`` values are checked against the parameter's
type (number: ``5``, ``2.5``; boolean: ``true``/``false``/``yes``/``no``/``1``/``0``) and its ``enum``. An
optional parameter with no default and no value fills as an empty string.

Every missing required parameter, unknown ``--param``, badly typed value and placeholder that names no
parameter is reported at once, each with its JSON path. The template's ``name`` and ``description`` become
the mission's unless the plan sets its own.

A notification rule's ``template`` is different: declared parameters are filled there too, but any other
``{{field}}`` is left for the notifier, which fills it from the event. Anywhere else a placeholder left in a
mission is an error (:func:`leftover_placeholders`, which the loader runs on every mission): otherwise bash
runs ``{{test_command}}`` literally and an agent is told to "investigate {{issue}}". GitHub Actions
expressions (``${{ secrets.X }}``) are not placeholders.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "PLACEHOLDER", "Filled", "Issue", "Parameter", "Template", "fill", "filled_bytes", "is_template",
    "leftover_placeholders", "parse_params", "parse_template", "template_rejection",
]

Loc = tuple[str | int, ...]
Issue = tuple[Loc, str]  # (location in the document, message); the loader/CLI turn locations into JSON paths

PLACEHOLDER = re.compile(r"(?<!\$)\{\{\s*([A-Za-z_][\w.-]*)\s*\}\}")
_PARAM_NAME = re.compile(r"[A-Za-z_][\w.-]*")
_TYPES = ("string", "number", "boolean")
_PARAM_KEYS = frozenset({"name", "description", "type", "required", "default", "enum"})
_TOP_KEYS = frozenset({"name", "description", "parameters", "plan", "mission"})
_TRUE, _FALSE = frozenset({"true", "yes", "1", "on"}), frozenset({"false", "no", "0", "off"})


@dataclass(frozen=True)
class Parameter:
    name: str
    type: str = "string"
    required: bool = False
    description: str = ""
    has_default: bool = False
    default: Any = None
    enum: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Template:
    name: str | None
    description: str | None
    parameters: tuple[Parameter, ...]
    key: str  # "plan" or "mission": where the mission document sits in the file
    body: dict[str, Any]

    def required(self) -> list[Parameter]:
        return [p for p in self.parameters if p.required and not p.has_default]


@dataclass(frozen=True)
class Filled:
    mission: dict[str, Any] | None  # None iff issues
    issues: list[Issue]
    values: dict[str, Any] = field(default_factory=dict)  # every parameter's value, given or default


def is_template(data: Any) -> bool:
    """A template rather than a mission: no ``tasks``, but ``plan``, ``mission`` or ``parameters``."""
    return isinstance(data, dict) and "tasks" not in data and bool({"plan", "mission", "parameters"} & data.keys())


# ------------------------------------------------------------------------------------------------ parsing
def parse_template(data: dict[str, Any]) -> tuple[Template | None, list[Issue], list[Issue]]:
    """(template, problems, warnings). Problems are about the template itself, not about a fill."""
    issues: list[Issue] = []
    warnings: list[Issue] = [((k,), "not a template field; ignored") for k in data if k not in _TOP_KEYS]
    key = "plan" if "plan" in data else "mission"
    body = data.get(key)
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except json.JSONDecodeError as e:
            issues.append(((key,), f"not valid JSON text of a mission: {e.msg} (line {e.lineno}, column {e.colno})"))
            body = {}
    if not isinstance(body, dict):
        issues.append(((key,), 'required: the mission document, an object with "tasks"'))
        body = {}
    name, description = data.get("name"), data.get("description")
    for k, v in (("name", name), ("description", description)):
        if v is not None and not isinstance(v, str):
            issues.append(((k,), "must be a string"))
    raw_params = data.get("parameters", [])
    if not isinstance(raw_params, list):
        issues.append((("parameters",), "must be a list of parameters"))
        raw_params = []
    params: list[Parameter] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(raw_params):
        p = _parameter(("parameters", i), raw, issues, warnings)
        if p is None:
            continue
        if p.name in seen:
            issues.append((("parameters", i, "name"),
                           f'duplicate parameter "{p.name}" (first at $.parameters[{seen[p.name]}])'))
            continue
        seen[p.name] = i
        params.append(p)
    if issues:
        return None, issues, warnings
    return (Template(name if isinstance(name, str) else None, description if isinstance(description, str) else None,
                     tuple(params), key, body), [], warnings)


def _parameter(loc: Loc, raw: Any, issues: list[Issue], warnings: list[Issue]) -> Parameter | None:
    if not isinstance(raw, dict):
        issues.append((loc, 'must be an object: {"name", "type", "required", "default", "description"}'))
        return None
    before = len(issues)
    warnings.extend(((*loc, k), "not a parameter field; ignored") for k in raw if k not in _PARAM_KEYS)
    name = raw.get("name")
    if not isinstance(name, str) or not _PARAM_NAME.fullmatch(name):
        issues.append(((*loc, "name"), "required: a name of letters, digits, _ . - (used as {{name}})"))
    kind = raw.get("type", "string")
    if kind not in _TYPES:
        issues.append(((*loc, "type"), f"must be one of {', '.join(_TYPES)}"))
        kind = "string"
    required = raw.get("required", False)
    if not isinstance(required, bool):
        issues.append(((*loc, "required"), "must be true or false"))
    description = raw.get("description", "")
    if not isinstance(description, str):
        issues.append(((*loc, "description"), "must be a string"))
    enum: list[Any] = []
    if "enum" in raw:
        if not isinstance(raw["enum"], list) or not raw["enum"]:
            issues.append(((*loc, "enum"), "must be a non-empty list of values"))
        else:
            for j, v in enumerate(raw["enum"]):
                value, err = _typed(v, kind)
                if err:
                    issues.append(((*loc, "enum", j), err))
                enum.append(value)
    default = None
    if "default" in raw:
        default, err = _typed(raw["default"], kind)
        if err:
            issues.append(((*loc, "default"), err))
        elif enum and default not in enum:
            issues.append(((*loc, "default"), f"{_show(default)} is not one of the enum values"))
    if len(issues) > before:
        return None
    assert isinstance(name, str)
    return Parameter(name=name, type=kind, required=bool(required), description=str(description),
                     has_default="default" in raw, default=default, enum=tuple(enum))


def _typed(v: Any, kind: str) -> tuple[Any, str | None]:
    """A value (JSON, or the text of a ``--param``) as the parameter's type, or why it is not one."""
    if kind == "string":
        return (v, None) if isinstance(v, str) else (v, f"must be a string (got {_show(v)})")
    if kind == "number":
        if isinstance(v, bool):
            return v, f"must be a number (got {_show(v)})"
        if isinstance(v, int | float):
            return v, None
        if isinstance(v, str):
            try:
                n: int | float = int(v.strip())
            except ValueError:
                try:
                    n = float(v.strip())
                except ValueError:
                    return v, f"must be a number (got {_show(v)})"
                if not math.isfinite(n):
                    return v, f"must be a finite number (got {_show(v)})"
            return n, None
        return v, f"must be a number (got {_show(v)})"
    if isinstance(v, bool):
        return v, None
    if isinstance(v, str) and v.strip().lower() in _TRUE | _FALSE:
        return v.strip().lower() in _TRUE, None
    return v, f"must be true or false (got {_show(v)})"


def _show(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False)


# ------------------------------------------------------------------------------------------------ filling
def parse_params(pairs: Sequence[str]) -> tuple[dict[str, str], list[Issue]]:
    """``["k=v", …]`` (``--param`` options) → {k: v}; a pair without ``=`` or a name given twice is a problem."""
    out: dict[str, str] = {}
    issues: list[Issue] = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            issues.append(((), f"--param {pair}: write NAME=VALUE"))
        elif name in out:
            issues.append(((), f"--param {name} is given twice"))
        else:
            out[name] = value
    return out, issues


def fill(template: Template, given: Mapping[str, str]) -> Filled:
    """The mission with every placeholder filled, or every reason it cannot be (all at once)."""
    issues: list[Issue] = []
    declared = {p.name: i for i, p in enumerate(template.parameters)}
    listing = ", ".join(declared) or "none"
    issues.extend(((), f'--param {k}: the template has no parameter "{k}" (it declares: {listing})')
                  for k in given if k not in declared)
    values: dict[str, Any] = {}
    texts: dict[str, str] = {}  # inside a string: a number as typed ("1200.50"), a boolean as true/false
    for i, p in enumerate(template.parameters):
        loc: Loc = ("parameters", i)
        if p.name in given:
            value, err = _typed(given[p.name], p.type)
            if err:
                issues.append((loc, f"--param {p.name}: {err}"))
                continue
            if p.enum and value not in p.enum:
                issues.append((loc, f"--param {p.name}: {_show(value)} is not one of "
                                    + ", ".join(_show(e) for e in p.enum)))
                continue
            values[p.name] = value
            texts[p.name] = given[p.name].strip() if p.type == "number" else _text(value)
        elif p.has_default:
            values[p.name], texts[p.name] = p.default, _text(p.default)
        elif p.required:
            about = f" ({p.description})" if p.description else ""
            issues.append((loc, f'required parameter "{p.name}" is missing: pass --param {p.name}=…{about}'))
        else:
            values[p.name] = texts[p.name] = ""
    if issues:
        return Filled(None, issues, values)
    body = _fill_node(template.body, (), _Fill(values, texts, listing, template.key), issues)
    if issues:
        return Filled(None, issues, values)
    mission: dict[str, Any] = {}
    for k, v in (("name", template.name), ("description", template.description)):
        if v is not None and k not in body:
            mission[k] = v
    mission.update(body)
    return Filled(mission, [], values)


@dataclass(frozen=True)
class _Fill:
    values: Mapping[str, Any]
    texts: Mapping[str, str]
    listing: str  # the declared parameters, for messages
    key: str  # "plan" | "mission", for paths in the template file


def _fill_node(node: Any, loc: Loc, f: _Fill, issues: list[Issue]) -> Any:
    if isinstance(node, dict):
        return {k: _fill_node(v, (*loc, k), f, issues) for k, v in node.items()}
    if isinstance(node, list):
        return [_fill_node(v, (*loc, i), f, issues) for i, v in enumerate(node)]
    if not isinstance(node, str) or "{{" not in node:
        return node
    runtime = _is_rule_template(loc)
    whole = PLACEHOLDER.fullmatch(node)
    if whole is not None and not runtime and not isinstance(f.values.get(whole.group(1), ""), str):
        return f.values[whole.group(1)]  # "{{depth}}" of a number parameter → 5

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name in f.texts:
            return f.texts[name]
        if not runtime:
            issues.append(((f.key, *loc), f'placeholder "{m.group(0)}" names no parameter of the template '
                                          f"(it declares: {f.listing})"))
        return m.group(0)

    return PLACEHOLDER.sub(sub, node)


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return "" if v is None else str(v)


def filled_bytes(mission: Mapping[str, Any]) -> bytes:
    """The filled mission as the file ``polpo submit`` writes: the same inputs always give the same bytes."""
    return (json.dumps(mission, ensure_ascii=False, indent=2) + "\n").encode()


# ---------------------------------------------------------------------------------------- leftovers
def _is_rule_template(loc: Loc) -> bool:
    """``notifications.rules[i].template`` of the mission or of a task: its ``{{field}}`` is filled per event."""
    tail = loc[-4:]
    return (len(tail) == 4 and tail[0] == "notifications" and tail[1] == "rules" and isinstance(tail[2], int)
            and tail[3] == "template" and (len(loc) == 4 or (len(loc) == 6 and loc[0] == "tasks")))


def _strings(data: Any) -> Iterator[tuple[Loc, str]]:
    """Every string value with its location; iterative, so deep documents are fine."""
    stack: list[tuple[Loc, Any]] = [((), data)]
    while stack:
        loc, node = stack.pop()
        if isinstance(node, str):
            yield loc, node
        elif isinstance(node, dict):
            stack.extend(((*loc, k), v) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend(((*loc, i), v) for i, v in reversed(list(enumerate(node))))


def leftover_placeholders(data: Any) -> list[Issue]:
    """Each string of a mission that still holds a ``{{name}}`` placeholder (rule templates excepted)."""
    out: list[Issue] = []
    for loc, s in _strings(data):
        if "{{" not in s or _is_rule_template(loc):
            continue
        names = list(dict.fromkeys(m.group(1) for m in PLACEHOLDER.finditer(s)))
        if names:
            shown = ", ".join("{{" + n + "}}" for n in names)
            params = " ".join(f"--param {n}=…" for n in names)
            out.append((loc, f"unfilled template placeholder {shown}: fill it with the value (or submit the "
                             f"template with `polpo submit TEMPLATE {params}`)"))
    return out


def template_rejection(data: dict[str, Any]) -> str:
    """Why the daemon does not run a template dropped in its folder, and how to run it."""
    kind = "workflow" if "plan" in data else "playbook"
    params = data.get("parameters")
    required = [p["name"] for p in params if isinstance(p, dict) and p.get("required") and "default" not in p
                and isinstance(p.get("name"), str)] if isinstance(params, list) else []
    args = " ".join(f"--param {n}=…" for n in required) or "[--param NAME=VALUE …]"
    return (f"this is a Polpo {kind} template (parameters and a {'plan' if kind == 'workflow' else 'mission'} "
            f"with {{{{placeholders}}}}), not a mission: fill it with `polpo submit FILE {args}`")
