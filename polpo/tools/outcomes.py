"""The ``register_outcome`` tool: an agent declares a deliverable (a file, a text, a URL, a JSON value).

Outcomes tell the reviewers and the mission report *what* the attempt produced, beyond the files it touched. The
tool validates and describes; a valid declaration goes to the session's
:attr:`~polpo.tools.registry.ToolContext.outcome_sink` (the LLM agent keeps the list,
:class:`polpo.agents.base.AgentResult.outcomes`). A ``file`` outcome must name an existing regular file inside the
workspace, checked through the :class:`~polpo.tools.sandbox.Sandbox` like every other path a model gives. Bad
arguments come back as ``ToolOutput(ok=False, text="Error: …")``; on success ``data["outcome"]`` holds the
JSON-able record ``{"type", "label", "value"}`` (plus ``"path"`` for files).
"""

from __future__ import annotations

import json
import os
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlsplit

import anyio.to_thread
from pydantic import Field, WithJsonSchema, field_validator

from polpo.tools.output import ToolError, ToolOutput, error_output
from polpo.tools.registry import Tool, ToolArgs, ToolContext
from polpo.tools.sandbox import Sandbox

__all__ = [
    "MAX_LABEL_CHARS",
    "MAX_VALUE_CHARS",
    "OUTCOME_TYPES",
    "REGISTER_OUTCOME",
    "RegisterOutcomeArgs",
    "register_outcome",
]

OutcomeType = Literal["file", "text", "url", "json"]
OUTCOME_TYPES: tuple[str, ...] = get_args(OutcomeType)
MAX_LABEL_CHARS = 200
MAX_VALUE_CHARS = 20_000


class RegisterOutcomeArgs(ToolArgs):
    type: OutcomeType
    label: str = Field(description="Short name of the deliverable, e.g. 'API docs'.")
    value: Annotated[Any, WithJsonSchema({"type": "string"})] = Field(
        None, description="The text, the URL or the JSON text (not for files)."
    )
    """Any JSON: some models send a ``json`` outcome's object itself rather than its text, and that is accepted."""
    path: str | None = Field(None, description="type 'file': the file, relative to the workspace root.")

    @field_validator("label")
    @classmethod
    def _label(cls, label: str) -> str:
        label = label.strip()
        if not label:
            raise ValueError("must be a non-empty string")
        if len(label) > MAX_LABEL_CHARS:
            raise ValueError(f"is longer than {MAX_LABEL_CHARS} characters")
        return label


def _invalid(message: str) -> ToolError:
    return ToolError(message, "invalid_arguments")


def _text_value(args: RegisterOutcomeArgs) -> str:
    value = args.value
    if not isinstance(value, str) or not value.strip():
        raise _invalid(f"type {args.type!r} needs a non-empty string 'value'")
    if len(value) > MAX_VALUE_CHARS:
        raise _invalid(
            f"'value' is longer than {MAX_VALUE_CHARS} characters; write it to a file and register the file instead"
        )
    return value


def _url_value(args: RegisterOutcomeArgs) -> str:
    value = _text_value(args).strip()
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise _invalid(f"{value[:200]!r} is not an http(s) URL")
    return value


def _json_value(args: RegisterOutcomeArgs) -> Any:
    value = args.value
    if value is None:
        raise _invalid("type 'json' needs 'value' (JSON text)")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise _invalid(f"'value' is not valid JSON: {exc}") from None
    if len(json.dumps(value, default=str)) > MAX_VALUE_CHARS:
        raise _invalid(f"the JSON value is longer than {MAX_VALUE_CHARS} characters; write it to a file instead")
    return value


def _file_path(sb: Sandbox, args: RegisterOutcomeArgs) -> str:
    path = args.path or args.value
    if not isinstance(path, str) or not path.strip():
        raise _invalid("type 'file' needs 'path', relative to the workspace root")
    real = sb.resolve(path, must_exist=True)
    if not os.path.isfile(real):
        raise _invalid(f"{path!r} is not a regular file")
    return sb.relative(real)


def _build(sb: Sandbox, args: RegisterOutcomeArgs) -> dict[str, Any]:
    if args.type == "file":
        rel = _file_path(sb, args)
        return {"type": args.type, "label": args.label, "value": rel, "path": rel}
    if args.type == "url":
        return {"type": args.type, "label": args.label, "value": _url_value(args)}
    if args.type == "json":
        return {"type": args.type, "label": args.label, "value": _json_value(args)}
    return {"type": args.type, "label": args.label, "value": _text_value(args)}


async def register_outcome(sb: Sandbox, args: RegisterOutcomeArgs) -> ToolOutput:
    """Validate one outcome declaration (a file check stats the disk, so it runs in a worker thread)."""
    try:
        outcome = await anyio.to_thread.run_sync(_build, sb, args) if args.type == "file" else _build(sb, args)
    except Exception as exc:
        return error_output("register_outcome", exc)
    shown = outcome.get("path") or (outcome["value"] if isinstance(outcome["value"], str) else "JSON value")
    return ToolOutput(
        ok=True,
        text=f"registered {outcome['type']} outcome {outcome['label']!r}: {str(shown)[:200]}",
        data={"outcome": outcome},
    )


async def _run(ctx: ToolContext, args: RegisterOutcomeArgs) -> ToolOutput:
    output = await register_outcome(ctx.sandbox, args)
    if output.ok and ctx.outcome_sink is not None:
        ctx.outcome_sink(output.data["outcome"])
    return output


REGISTER_OUTCOME = Tool(
    name="register_outcome",
    description=(
        "Declare a deliverable of the task so reviewers can find it: a file you produced (type 'file' with "
        "`path`), a text answer ('text'), a link ('url') or a structured result ('json', `value` holding JSON "
        "text). Registering the same label again replaces the earlier one."
    ),
    args=RegisterOutcomeArgs,
    handler=_run,
    read_only=False,
)
