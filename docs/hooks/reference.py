"""MkDocs hook: the reference pages' tables are built from polpo's own code at build time, so they cannot drift.

A reference page holds its prose and a marker such as ``<!-- generated: cli -->``; the marker is replaced by
Markdown made from the mission schema (``polpo schema``), the config model, click's command tree, the OpenAPI
document, the event catalogue or the metric registry. A marker naming no generator fails the build.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from datetime import timedelta
from enum import Enum
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel

MARKER = re.compile(r"<!-- generated: ([a-z-]+) -->")


def _cell(text: object) -> str:
    """One table cell: no line breaks, no bare pipes."""
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def _code(value: object) -> str:
    return f"`{_cell(value)}`" if value not in (None, "") else ""


# ------------------------------------------------------------------------------------------------ mission schema


def _schema_type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[-1]
    if "enum" in prop:
        return " \\| ".join(json.dumps(v) for v in prop["enum"])
    if "const" in prop:
        return json.dumps(prop["const"])
    for key in ("anyOf", "oneOf"):
        if key in prop:
            return " or ".join(_schema_type(p) for p in prop[key])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_schema_type(prop.get('items', {}))}"
    return " or ".join(kind) if isinstance(kind, list) else str(kind)


def _schema_table(schema: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", []))
    rows = ["| field | type | required | description |", "|---|---|---|---|"]
    for name, prop in schema.get("properties", {}).items():
        rows.append(f"| `{name}` | {_cell(_schema_type(prop))} | {'yes' if name in required else ''} | "
                    f"{_cell(prop.get('description', ''))} |")
    return rows


def mission_schema() -> str:
    from polpo.mission.schema import mission_json_schema

    schema = mission_json_schema()
    out = ["## Mission (top level)", "", *_schema_table(schema), ""]
    for name, definition in sorted(schema.get("$defs", {}).items()):
        if definition.get("properties"):
            out += [f"## {name}", "", _cell(definition.get("description", "")), "", *_schema_table(definition), ""]
    out += ["## The whole schema", "", "What `polpo schema` prints:", "", "```json",
            json.dumps(schema, indent=2, ensure_ascii=False), "```"]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------ config


def _type_name(annotation: Any) -> str:
    """A config key's type as a reader writes it in TOML, not as Python spells it."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is timedelta:
        return "duration (seconds, or ISO-8601 such as PT30S)"
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(x) for x in args if x is not type(None))
    if origin is typing.Literal:
        return " or ".join(json.dumps(x) for x in args)
    if origin in (list, dict, tuple, set):
        return f"{origin.__name__}[{', '.join(_type_name(x) for x in args)}]"
    return getattr(annotation, "__name__", str(annotation))


def _default(field: Any) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:
            return ""
    else:
        value = field.default
    if value is None or value == "" or isinstance(value, BaseModel):
        return ""
    if isinstance(value, timedelta):
        return _code(f"{value.total_seconds():g}")  # seconds, as the config file writes them
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, bool | list | dict):
        return _code(json.dumps(value))  # TOML spells these as JSON does: true, [], {}
    return _code(value if not isinstance(value, Path) else str(value))


def _model_rows(model: type[BaseModel]) -> list[str]:
    rows = ["| key | type | default |", "|---|---|---|"]
    for key, field in model.model_fields.items():
        default = "(this host's name)" if key == "node" else _default(field)
        rows.append(f"| `{key}` | {_cell(_type_name(field.annotation))} | {default} |")
    return rows


def config_keys() -> str:
    from polpo.config import Config

    out: list[str] = []
    for section, field in Config.model_fields.items():
        if section == "source":
            continue
        annotation = field.annotation
        args = typing.get_args(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out += [f"### `[{section}]`", "", *_model_rows(annotation), ""]
            for key, sub in annotation.model_fields.items():  # a table of named tables: [mcp.servers.NAME]
                inner = typing.get_args(sub.annotation)
                if typing.get_origin(sub.annotation) is dict and isinstance(inner[-1], type) \
                        and issubclass(inner[-1], BaseModel):
                    out += [f"### `[{section}.{key}.NAME]`", "", *_model_rows(inner[-1]), ""]
        elif args and isinstance(args[-1], type) and issubclass(args[-1], BaseModel):
            out += [f"### `[{section}.NAME]`", "", *_model_rows(args[-1]), ""]
        else:
            out += [f"### `[{section}]`", "", "Free-form tables, checked when the daemon starts (see "
                    "[Notifications](../how-to/notifications.md)).", ""]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------ CLI


def _walk(cmd: click.Command, path: list[str], ctx: click.Context, out: list[str]) -> None:
    name = " ".join(path)
    out += [f"## `{name}`", ""]
    sub_ctx = click.Context(cmd, info_name=path[-1], parent=ctx)
    out += ["```text", f"{name} {' '.join(cmd.collect_usage_pieces(sub_ctx))}".rstrip(), "```", ""]
    if cmd.help:
        out += [inspect.cleandoc(cmd.help).replace("\b\n", "").strip(), ""]
    params = [p for p in cmd.params if isinstance(p, click.Option) and not p.hidden]
    if params:
        out += ["| option | what |", "|---|---|"]
        for p in params:
            names = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
            out.append(f"| {names} | {_cell(p.help or '')} |")
        out.append("")
    if isinstance(cmd, click.Group):
        for sub in cmd.list_commands(sub_ctx):
            child = cmd.get_command(sub_ctx, sub)
            if child is not None:
                _walk(child, [*path, sub], sub_ctx, out)


def cli() -> str:
    from polpo.cli import main

    out: list[str] = []
    ctx = click.Context(main, info_name="polpo")
    for sub in main.list_commands(ctx):
        cmd = main.get_command(ctx, sub)
        if cmd is not None:
            _walk(cmd, ["polpo", sub], ctx, out)
    text = "\n".join(out)
    return re.sub(r"^(#+) ", lambda m: m.group(1)[:-1] + "# " if len(m.group(1)) > 2 else m.group(0), text,
                  flags=re.M)


# ------------------------------------------------------------------------------------------------ HTTP API


def http_api() -> str:
    from polpo.http.openapi import openapi_document

    doc = json.loads(openapi_document("docs"))
    out = ["| method | path | summary |", "|---|---|---|"]
    for path, ops in doc.get("paths", {}).items():
        for method, op in ops.items():
            if isinstance(op, dict):
                summary = op.get("summary") or op.get("description", "")
                out.append(f"| {method.upper()} | `{path}` | {_cell(summary)} |")
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------ events


def events() -> str:
    from pydantic.alias_generators import to_camel

    from polpo.events.catalog import PAYLOADS

    out = ["| event | data fields |", "|---|---|"]
    for name, payload in sorted(PAYLOADS.items()):
        fields = ", ".join(f"`{to_camel(f.name.rstrip('_'))}`" for f in dataclasses.fields(payload))  # type: ignore[arg-type]
        out.append(f"| `{name}` | {fields} |")
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------ metrics


def metrics() -> str:
    from prometheus_client import Counter

    from polpo.telemetry.prometheus import Metrics

    m = Metrics(version="docs", tasks_by_status=lambda: {"pending": 0}, queue_depth=lambda: 0, running=lambda: 0,
                missions_running=lambda: 0, stream_clients=lambda: 0, reviews=lambda *a, **k: [])
    labels: dict[str, tuple[str, ...]] = {}
    for collector in list(m.registry._collector_to_names):  # the registry lists no label names
        names = getattr(collector, "_labelnames", None)
        if names is not None:
            suffix = "_total" if isinstance(collector, Counter) else ""
            labels[collector._name + suffix] = tuple(names)
    out = ["| metric | type | labels | what |", "|---|---|---|---|"]
    for family in m.registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        names = labels.get(name) or tuple(sorted({k for s in family.samples for k in s.labels} - {"le"}))
        out.append(f"| `{name}` | {family.type} | {', '.join(f'`{n}`' for n in names)} | "
                   f"{_cell(family.documentation)} |")
    return "\n".join(out)


GENERATORS: dict[str, Callable[[], str]] = {
    "mission-schema": mission_schema, "config": config_keys, "cli": cli, "http-api": http_api, "events": events,
    "metrics": metrics,
}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"{page.file.src_uri}: no generator named {name!r} (known: {', '.join(GENERATORS)})")
        return GENERATORS[name]()

    return MARKER.sub(replace, markdown)


if __name__ == "__main__":  # print one generated table: python docs/hooks/reference.py cli
    import sys

    print(GENERATORS[sys.argv[1]]())
