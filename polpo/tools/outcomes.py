"""The ``register_outcome`` tool: an agent declares a deliverable (a file, a text, a URL, a JSON value).

Outcomes tell the reviewers and the mission report *what* the attempt produced, beyond the files it touched. The
tool only validates and describes; the agent keeps the list (:class:`polpo.agents.base.AgentResult.outcomes`).
A ``file`` outcome must name an existing regular file inside the workspace, checked through the
:class:`~polpo.tools.sandbox.Sandbox` like every other path a model gives. Bad arguments come back as
``ToolOutput(ok=False, text="Error: …")``; on success ``data["outcome"]`` holds the JSON-able record
``{"type", "label", "value"}`` (plus ``"path"`` for files).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread

from polpo.tools.files import ToolOutput
from polpo.tools.sandbox import Sandbox, SandboxError

__all__ = ["MAX_LABEL_CHARS", "MAX_VALUE_CHARS", "OUTCOME_TYPES", "REGISTER_OUTCOME_SCHEMA", "register_outcome"]

OUTCOME_TYPES: tuple[str, ...] = ("file", "text", "url", "json")
MAX_LABEL_CHARS = 200
MAX_VALUE_CHARS = 20_000

REGISTER_OUTCOME_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "register_outcome",
        "description": (
            "Declare a deliverable of the task so reviewers can find it: a file you produced (type 'file' with "
            "`path`), a text answer ('text'), a link ('url') or a structured result ('json', `value` holding JSON "
            "text). Registering the same label again replaces the earlier one."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": list(OUTCOME_TYPES)},
                "label": {"type": "string", "description": "Short name of the deliverable, e.g. 'API docs'."},
                "value": {"type": "string", "description": "The text, the URL or the JSON text (not for files)."},
                "path": {
                    "type": "string",
                    "description": "type 'file': the file, relative to the workspace root.",
                },
            },
            "required": ["type", "label"],
            "additionalProperties": False,
        },
    },
}


class _Invalid(Exception):
    pass


def _fail(message: str, kind: str = "invalid_arguments") -> ToolOutput:
    return ToolOutput(ok=False, text=f"Error: {message}", data={"error": kind, "tool": "register_outcome"})


def _label(args: Mapping[str, Any]) -> str:
    label = args.get("label")
    if not isinstance(label, str) or not label.strip():
        raise _Invalid("'label' must be a non-empty string")
    label = label.strip()
    if len(label) > MAX_LABEL_CHARS:
        raise _Invalid(f"'label' is longer than {MAX_LABEL_CHARS} characters")
    return label


def _text_value(args: Mapping[str, Any]) -> str:
    value = args.get("value")
    if not isinstance(value, str) or not value.strip():
        raise _Invalid(f"type {args.get('type')!r} needs a non-empty string 'value'")
    if len(value) > MAX_VALUE_CHARS:
        raise _Invalid(f"'value' is longer than {MAX_VALUE_CHARS} characters; write it to a file and register "
                       "the file instead")
    return value


def _url_value(args: Mapping[str, Any]) -> str:
    value = _text_value(args).strip()
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise _Invalid(f"{value[:200]!r} is not an http(s) URL")
    return value


def _json_value(args: Mapping[str, Any]) -> Any:
    raw = args.get("value")
    if raw is None:
        raise _Invalid("type 'json' needs 'value' (JSON text)")
    if not isinstance(raw, str):  # some models send the object itself: accept it
        value = raw
    else:
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise _Invalid(f"'value' is not valid JSON: {exc}") from None
    if len(json.dumps(value, default=str)) > MAX_VALUE_CHARS:
        raise _Invalid(f"the JSON value is longer than {MAX_VALUE_CHARS} characters; write it to a file instead")
    return value


def _file_path(sb: Sandbox, args: Mapping[str, Any]) -> str:
    path = args.get("path") or args.get("value")
    if not isinstance(path, str) or not path.strip():
        raise _Invalid("type 'file' needs 'path', relative to the workspace root")
    try:
        real = sb.resolve(path, must_exist=True)
    except SandboxError as exc:
        raise _Invalid(str(exc)) from None
    if not os.path.isfile(real):
        raise _Invalid(f"{path!r} is not a regular file")
    return sb.relative(real)


def _build(sb: Sandbox, args: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(args) - {"type", "label", "value", "path"})
    if unknown:
        raise _Invalid(f"unexpected argument(s) {', '.join(map(repr, unknown))}; "
                       "it accepts 'type', 'label', 'value', 'path'")
    kind = args.get("type")
    if kind not in OUTCOME_TYPES:
        raise _Invalid(f"'type' must be one of {', '.join(OUTCOME_TYPES)}, got {kind!r}")
    label = _label(args)
    if kind == "file":
        rel = _file_path(sb, args)
        return {"type": kind, "label": label, "value": rel, "path": rel}
    if kind == "url":
        return {"type": kind, "label": label, "value": _url_value(args)}
    if kind == "json":
        return {"type": kind, "label": label, "value": _json_value(args)}
    return {"type": kind, "label": label, "value": _text_value(args)}


async def register_outcome(sb: Sandbox, args: Mapping[str, Any]) -> ToolOutput:
    """Validate one outcome declaration (a file check stats the disk, so it runs in a worker thread)."""
    try:
        if args.get("type") == "file":
            outcome = await anyio.to_thread.run_sync(_build, sb, args)
        else:
            outcome = _build(sb, args)
    except _Invalid as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"register_outcome failed: {exc.strerror or type(exc).__name__}", "io")
    shown = outcome.get("path") or (outcome["value"] if isinstance(outcome["value"], str) else "JSON value")
    return ToolOutput(ok=True, text=f"registered {outcome['type']} outcome {outcome['label']!r}: {str(shown)[:200]}",
                      data={"outcome": outcome})
