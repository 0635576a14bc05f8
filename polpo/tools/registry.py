"""One registry for every model-callable tool: its schema, its argument binding, its dispatch, its errors.

A :class:`Tool` is a name, a description, an argument model (a :class:`ToolArgs` pydantic model whose JSON schema
*is* the ``parameters`` the model is shown), an async handler and a ``read_only`` flag. A :class:`ToolRegistry`
holds a set of tools and gives:

* :meth:`~ToolRegistry.schemas`: the OpenAI function-tool objects for ``litellm.acompletion(tools=[...])``;
* :meth:`~ToolRegistry.read_only`: the subset whose flag says they change nothing (what reviewers get);
* :meth:`~ToolRegistry.dispatch`: bind the model's arguments (:func:`bind`) and run the handler. Every problem
  comes back as ``ToolOutput(ok=False, text="Error: …", data={"error": kind, "tool": name, …})``: an unknown tool
  lists the available ones, bad arguments say which and why, a :class:`~polpo.tools.output.ToolError` keeps its
  kind, and any other exception from a handler is an ``internal`` error. Only cancellation propagates.

The binder is lenient where models commonly slip and strict where a guess would be wrong: empty or ``null``
arguments mean ``{}``, arguments JSON-encoded twice are decoded, ``null`` for an optional argument means its
default, an integer may come as ``5``, ``5.0`` or ``"5"``; but an unknown argument, a missing required one, or a
string where a number belongs is refused with a message naming the argument.

Handlers get a :class:`ToolContext` (the workspace and its sandbox, the clock, the attempt's environment marker,
the command timeout cap, where declared outcomes go), so callers never special-case a tool.
"""

from __future__ import annotations

import copy
import pickle
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Generic, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from polpo.clock import Clock, SystemClock
from polpo.llm import lenient_json
from polpo.tools.output import ToolError, ToolOutput, error_output, fail, json_type
from polpo.tools.sandbox import Sandbox

__all__ = [
    "Integer",
    "Number",
    "OutcomeSink",
    "Tool",
    "ToolArgs",
    "ToolContext",
    "ToolRegistry",
    "bind",
    "decode_arguments",
]

OutcomeSink = Callable[[Mapping[str, Any]], None]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What handlers may use beyond their arguments, for one session (an agent attempt or a reviewer run)."""

    workspace: Path
    clock: Clock = field(default_factory=SystemClock)
    env_marker: tuple[str, str] | None = None
    """(key, value) put in a command's environment so its orphans can be found after a daemon crash."""
    command_timeout: float = 120.0
    """The most seconds a command may run, whatever the model asks."""
    outcome_sink: OutcomeSink | None = None
    """Receives each valid ``register_outcome`` declaration; None: declarations are validated, then dropped."""
    sandbox: Sandbox = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sandbox", Sandbox(self.workspace))


# ------------------------------------------------------------------------------------------------- arguments


class ToolArgs(BaseModel):
    """Base of argument models: unknown arguments are refused, types are strict (use :data:`Integer` and
    :data:`Number` for the lenient numbers models send)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _integer(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if (isinstance(value, float) and value.is_integer()) or (
        isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value)
    ):
        return int(value)
    raise ValueError(f"must be an integer, got {json_type(value)}")


def _number(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise ValueError(f"must be a number, got {json_type(value)}")


Integer = Annotated[int, BeforeValidator(_integer)]
"""An integer argument; ``5.0`` and ``"5"`` are accepted as 5. The schema says ``integer``."""
Number = Annotated[float, BeforeValidator(_number)]
"""A number argument; ``"2.5"`` is accepted. The schema says ``number``."""


class _ParametersSchema(GenerateJsonSchema):
    """JSON schema as the model should read it: no generated titles, no ``anyOf`` with null, no defaults (the
    descriptions say them)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])


def parameters_schema(model: type[ToolArgs]) -> dict[str, Any]:
    """The ``parameters`` object of a tool whose arguments are ``model``."""
    schema = model.model_json_schema(schema_generator=_ParametersSchema)
    if "$defs" in schema:
        raise ValueError(f"{model.__name__}: tool arguments must be flat (no nested models)")
    schema.pop("title", None)
    schema.setdefault("required", [])
    return schema


_TYPE_PHRASES = {
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "float_type": "must be a number",
    "bool_type": "must be true or false",
    "list_type": "must be an array",
    "dict_type": "must be an object",
}


def _explain(error: Mapping[str, Any]) -> str:
    where = ".".join(str(p) for p in error["loc"])
    kind, given = error["type"], error.get("input")
    if kind == "value_error":
        phrase = str(error["msg"]).removeprefix("Value error, ")
    elif kind in _TYPE_PHRASES:
        phrase = f"{_TYPE_PHRASES[kind]}, got {json_type(given)}"
    else:
        shown = repr(given)[:80] if isinstance(given, str | int | float) else json_type(given)
        phrase = re.sub(r"^Input should be", "must be", str(error["msg"])) + f", got {shown}"
    return f"argument {where!r} {phrase}" if where else phrase


def decode_arguments(tool: str, raw: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """The model's arguments as a dict: empty or ``null`` is ``{}``, a mapping is taken as is, text is JSON
    (encoded twice is accepted). :class:`ToolError` (``invalid_json`` / ``invalid_arguments``) otherwise."""
    value: Any = raw
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            value = lenient_json.loads(raw)  # strict first; then a small model's slips (see lenient_json)
            if isinstance(value, str) and value.lstrip().startswith("{"):  # some models encode the object twice
                value = lenient_json.loads(value)
        except (ValueError, RecursionError) as exc:
            raise ToolError(
                f"{tool}: arguments are not valid JSON ({exc}); send one JSON object, "
                'for example {"path": "src/main.py"}',
                "invalid_json",
            ) from None
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ToolError(
            f'{tool}: arguments must be a JSON object like {{"path": "..."}}, got {json_type(value)}',
            "invalid_arguments",
        )
    return dict(value)


A = TypeVar("A", bound=ToolArgs)


@dataclass(frozen=True, slots=True)
class Tool(Generic[A]):
    """One model-callable tool. ``read_only``: it changes nothing (no file, no process, no record)."""

    name: str
    description: str
    args: type[A]
    handler: Callable[[ToolContext, A], Awaitable[ToolOutput]]
    read_only: bool
    parameters: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", parameters_schema(self.args))

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool object (a fresh copy: callers may hand it to code that mutates it)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(self.parameters),
            },
        }


def bind(tool: Tool[A], raw: str | Mapping[str, Any] | None) -> A:
    """The model's arguments validated into ``tool.args``; :class:`ToolError` with a readable reason otherwise."""
    args = decode_arguments(tool.name, raw)
    fields = tool.args.model_fields
    unknown = sorted(set(args) - set(fields))
    if unknown:
        accepts = ", ".join(map(repr, fields)) or "no arguments"
        raise ToolError(
            f"{tool.name}: unexpected argument(s) {', '.join(map(repr, unknown))}; it accepts {accepts}",
            "invalid_arguments",
        )
    missing = [n for n, f in fields.items() if f.is_required() and args.get(n) is None]
    if missing:
        raise ToolError(
            f"{tool.name}: missing required argument(s) {', '.join(map(repr, missing))}", "invalid_arguments"
        )
    given = {k: v for k, v in args.items() if v is not None}  # null for an optional argument: its default
    try:
        return tool.args.model_validate(given)
    except ValidationError as exc:
        reasons = "; ".join(_explain(e) for e in exc.errors(include_url=False)[:5])
        raise ToolError(f"{tool.name}: {reasons}", "invalid_arguments") from None


# ------------------------------------------------------------------------------------------------- registry


class ToolRegistry:
    """An ordered set of tools with unique names; see the module docstring."""

    __slots__ = ("_schemas", "_tools")

    def __init__(self, tools: Iterable[Tool[Any]]) -> None:
        self._schemas: bytes | None = None
        self._tools: dict[str, Tool[Any]] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"tool {tool.name!r} registered twice")
            self._tools[tool.name] = tool

    def __repr__(self) -> str:
        return f"ToolRegistry({', '.join(self._tools)})"

    def __iter__(self) -> Iterator[Tool[Any]]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __getitem__(self, name: str) -> Tool[Any]:
        return self._tools[name]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def read_only(self) -> ToolRegistry:
        """The tools whose ``read_only`` flag is set, in the same order."""
        return ToolRegistry(t for t in self if t.read_only)

    def schemas(self) -> list[dict[str, Any]]:
        """The OpenAI function-tool objects of every tool, in order, for ``tools=``: a fresh copy each time, as
        :meth:`Tool.schema` gives, unpickled from one kept copy (a sixth of the deep copies' time, once per
        reviewer and agent run)."""
        if self._schemas is None:
            self._schemas = pickle.dumps([t.schema() for t in self], protocol=pickle.HIGHEST_PROTOCOL)
        schemas: list[dict[str, Any]] = pickle.loads(self._schemas)  # our own bytes, made above
        return schemas

    async def dispatch(
        self, ctx: ToolContext, name: str, arguments: str | Mapping[str, Any] | None
    ) -> ToolOutput:
        """Run tool ``name`` with the model's ``arguments`` (JSON text or a mapping); never raises but for
        cancellation: every failure is an ``ok=False`` output with ``data["tool"] == name``."""
        bound = self.bound(name, arguments)
        if isinstance(bound, ToolOutput):
            return bound
        return await self.run(ctx, *bound)

    def bound(self, name: str, arguments: str | Mapping[str, Any] | None) -> tuple[Tool[Any], ToolArgs] | ToolOutput:
        """The tool and its bound arguments, or the failed output that says why not (unknown tool, bad
        arguments): a caller may look at a call before it runs (an approval)."""
        tool = self._tools.get(name)
        if tool is None:
            return fail(
                f"unknown tool {name!r}; available tools: {', '.join(self._tools)}", "unknown_tool", tool=name
            )
        try:
            return tool, bind(tool, arguments)
        except ToolError as exc:
            return _named(error_output(name, exc), name)

    async def run(self, ctx: ToolContext, tool: Tool[Any], args: ToolArgs) -> ToolOutput:
        """Run a bound call; every failure is an ``ok=False`` output naming the tool."""
        try:
            output = await tool.handler(ctx, args)
        except Exception as exc:  # ToolError/SandboxError/OSError keep their kind; anything else is "internal"
            output = error_output(tool.name, exc)
        return _named(output, tool.name)


def _named(output: ToolOutput, name: str) -> ToolOutput:
    if not output.ok and "tool" not in output.data:
        return ToolOutput(ok=False, text=output.text, data={**output.data, "tool": name})
    return output
