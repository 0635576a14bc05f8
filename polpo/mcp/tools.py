"""A server's tools as a model's tools: names, schemas, argument checks and results as text. Pure.

A tool ``status`` of server ``git`` is ``git.status`` wherever a person reads or writes its name (``approve_tools``,
events, transcripts, spans). Providers accept only ``[A-Za-z0-9_-]{1,64}`` as a function's name, so the model is
shown ``git__status`` (:func:`wire_names`; a name still too long or taken gets a short hash).

The arguments a model sends are decoded as leniently as the built-in tools' (:func:`polpo.tools.registry.
decode_arguments`) and validated against the tool's input schema before the server sees them, so a wrong call comes
back to the model as a readable ``Error:`` naming the argument, as for the built-in tools. A result's content
becomes text: text as is, an image or audio as a note of its type and size, a resource as its text or a link;
``structuredContent`` alone as JSON. Results are cut to :data:`MAX_RESULT_CHARS` (the request is then fitted to the
model's context like any other, :mod:`polpo.llm.context`). Descriptions are the server's words: cut to
:data:`MAX_DESCRIPTION_CHARS` and labelled with the server's name; the agent's prompt says they are untrusted.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from polpo.tools.output import ToolError, json_type
from polpo.tools.registry import decode_arguments

if TYPE_CHECKING:
    import mcp_types

__all__ = ["MAX_DESCRIPTION_CHARS", "MAX_RESULT_CHARS", "McpTool", "check_arguments", "offered", "result_text",
           "tool_of", "wire_names"]

MAX_RESULT_CHARS = 100_000
MAX_DESCRIPTION_CHARS = 2_000
WIRE_MAX = 64
_WIRE_BAD = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class McpTool:
    """One tool of one server, as listed by it."""

    server: str
    name: str  # the server's own name for it
    description: str
    schema: dict[str, Any]
    read_only: bool = False
    _validator: list[Any] = field(default_factory=list, compare=False, repr=False)  # compiled once, when first used

    @property
    def qualified(self) -> str:
        """``server.tool``: its name for people (config, events, transcripts)."""
        return f"{self.server}.{self.name}"

    def function(self, wire: str) -> dict[str, Any]:
        """The OpenAI function-tool object under its ``wire`` name."""
        return {"type": "function", "function": {
            "name": wire, "description": f"[{self.server} (MCP server)] {self.description}".strip(),
            "parameters": self.schema}}

    def validator(self) -> Any:
        if not self._validator:
            import jsonschema  # lazy: only an agent that calls an MCP tool pays for it

            cls = jsonschema.validators.validator_for(self.schema, default=jsonschema.Draft202012Validator)
            self._validator.append(cls(self.schema))
        return self._validator[0]


def tool_of(server: str, tool: mcp_types.Tool) -> McpTool:
    """A listed tool, its description cut and its schema made one a provider takes (an object with properties)."""
    schema = dict(tool.input_schema or {}) or {"type": "object"}
    if schema.get("type") == "object":
        schema.setdefault("properties", {})  # some providers refuse an object schema without properties
    description = (tool.description or tool.title or "").strip()
    if len(description) > MAX_DESCRIPTION_CHARS:
        description = description[:MAX_DESCRIPTION_CHARS] + " […]"
    hints = tool.annotations
    return McpTool(server, tool.name, description, schema,
                   read_only=bool(hints is not None and hints.read_only_hint))


def offered(tools: Iterable[McpTool], allow: Sequence[str], deny: Sequence[str]) -> list[McpTool]:
    """The tools an agent is shown: those ``allow`` matches (all, when it is empty) and ``deny`` does not."""
    def hit(name: str, patterns: Sequence[str]) -> bool:
        return any(fnmatch.fnmatchcase(name, p) for p in patterns)

    return [t for t in tools if (not allow or hit(t.name, allow)) and not hit(t.name, deny)]


def wire_names(tools: Sequence[McpTool], taken: Iterable[str] = ()) -> dict[str, McpTool]:
    """Each tool under a name a provider accepts, unique among themselves and ``taken`` (the built-in tools)."""
    used = set(taken)
    out: dict[str, McpTool] = {}
    for t in tools:
        name = _WIRE_BAD.sub("_", f"{t.server}__{t.name}")
        if len(name) > WIRE_MAX or name in used:
            digest = hashlib.sha256(t.qualified.encode()).hexdigest()[:8]
            name = f"{name[:WIRE_MAX - 9]}_{digest}"
        used.add(name)
        out[name] = t
    return out


def check_arguments(tool: McpTool, raw: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """The model's arguments, decoded and valid for the tool's schema; :class:`ToolError` names what is wrong."""
    args = decode_arguments(tool.qualified, raw)
    try:
        errors = sorted(tool.validator().iter_errors(args), key=lambda e: list(e.absolute_path))[:5]
    except Exception as exc:  # a schema the validator cannot use: the server decides
        raise ToolError(f"{tool.qualified}: its input schema cannot be checked ({type(exc).__name__}: {exc}); "
                        "the server refused nothing yet", "invalid_schema") from None
    if errors:
        raise ToolError(f"{tool.qualified}: " + "; ".join(_explain(e) for e in errors), "invalid_arguments")
    return args


def _explain(error: Any) -> str:
    where = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "required":
        return str(error.message).replace("is a required property", "is a required argument")
    if error.validator == "additionalProperties":
        return f"{error.message} (not an argument of this tool)"
    if error.validator == "type":
        return f"argument {where!r} must be {error.validator_value}, got {json_type(error.instance)}"
    return f"argument {where!r}: {error.message}" if where else str(error.message)


def result_text(result: mcp_types.CallToolResult) -> str:  # (the SDK is loaded: a result came)
    """What the model reads of a result (``is_error`` is the caller's to report)."""
    parts = [_content_text(c) for c in result.content]
    if not any(parts) and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False, default=str)]
    text = "\n".join(p for p in parts if p)
    if len(text) > MAX_RESULT_CHARS:
        text = (text[:MAX_RESULT_CHARS] + f"\n[… {len(text) - MAX_RESULT_CHARS} more characters of this result "
                "were cut; ask the tool for less]")
    return text


def _content_text(c: mcp_types.ContentBlock) -> str:
    import mcp_types

    if isinstance(c, mcp_types.TextContent):
        return c.text
    if isinstance(c, mcp_types.ImageContent | mcp_types.AudioContent):
        kind = "image" if isinstance(c, mcp_types.ImageContent) else "audio"
        return f"[{kind} {c.mime_type}, {len(c.data) * 3 // 4} bytes: not shown]"
    if isinstance(c, mcp_types.EmbeddedResource):
        r = c.resource
        if isinstance(r, mcp_types.TextResourceContents):
            return f"[resource {r.uri}]\n{r.text}"
        return f"[resource {r.uri}, {r.mime_type or 'binary'}, {len(r.blob) * 3 // 4} bytes: not shown]"
    return f"[link {c.uri}" + (f": {c.name}" if c.name else "") + "]"  # a ResourceLink
