"""polpo.tools.registry with the real tool catalog on real folders: schemas, binding, dispatch, error shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from polpo.tools.catalog import TOOLS
from polpo.tools.output import ToolError, ToolOutput
from polpo.tools.registry import Integer, Tool, ToolArgs, ToolContext, ToolRegistry, bind

pytestmark = pytest.mark.anyio

READ_ONLY = ("read_file", "glob", "grep", "list_dir")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_text("import pkg\n\ndef main():\n    return 42\n")
    return root


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext(ws)


def _err(out: ToolOutput, kind: str | None = None) -> str:
    assert not out.ok, out.text
    assert out.text.startswith("Error: ")
    assert out.data["tool"]  # every failure names its tool
    if kind is not None:
        assert out.data["error"] == kind, out.data
    return out.text


class _Nothing(ToolArgs):
    pass


class _Count(ToolArgs):
    n: Integer = 1


def _tool(name: str, handler: Any, *, args: type[ToolArgs] = _Nothing, read_only: bool = True) -> Tool[Any]:
    return Tool(name=name, description=f"test tool {name}", args=args, handler=handler, read_only=read_only)


# ---------------------------------------------------------------------------------------------- schemas


def test_every_tool_has_a_function_schema() -> None:
    assert TOOLS.names == (*READ_ONLY, "write_file", "edit_file", "run_command", "register_outcome")
    schemas = TOOLS.schemas()
    for tool, schema in zip(TOOLS, schemas, strict=True):
        assert schema["type"] == "function"
        fn = schema["function"]
        assert fn["name"] == tool.name and fn["description"] == tool.description
        params = fn["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert set(params["required"]) <= set(params["properties"])
        json.dumps(schema)  # serialisable as is
    assert TOOLS["edit_file"].schema()["function"]["parameters"]["required"] == ["path", "old", "new"]
    schemas[0]["function"]["parameters"]["properties"].clear()  # a caller mutating its copy changes nothing
    assert TOOLS.schemas()[0]["function"]["parameters"]["properties"]


def test_the_schema_the_model_sees_is_the_argument_model() -> None:
    for tool in TOOLS:
        params = tool.schema()["function"]["parameters"]
        fields = tool.args.model_fields
        assert list(params["properties"]) == list(fields), tool.name
        assert params["required"] == [n for n, f in fields.items() if f.is_required()], tool.name
        text = json.dumps(params)
        for noise in ('"title"', '"anyOf"', '"default"', '"$defs"'):
            assert noise not in text, (tool.name, noise)
        for name, prop in params["properties"].items():
            assert prop["type"] in ("string", "integer", "number"), (tool.name, name)
            assert prop.get("description") or "enum" in prop, (tool.name, name)


def test_what_the_schema_types_say_is_what_the_binder_accepts() -> None:
    samples = {"string": ("text", 3), "integer": (7, "seven"), "number": (2.5, "soon")}
    for tool in TOOLS:
        params = tool.parameters
        base = {n: _valid(params["properties"][n]) for n in params["required"]}
        bind(tool, base)  # the required arguments alone are enough
        for name, prop in params["properties"].items():
            good, bad = samples[prop["type"]]
            if "enum" in prop or name == "value":  # enum: one of the listed; value: any JSON (documented)
                continue
            bind(tool, {**base, name: good})
            with pytest.raises(ToolError) as caught:
                bind(tool, {**base, name: bad})
            assert caught.value.kind == "invalid_arguments" and repr(name) in str(caught.value)


def _valid(prop: dict[str, Any]) -> Any:
    if "enum" in prop:
        return prop["enum"][1]  # register_outcome: "text"
    return {"string": "x", "integer": 3, "number": 3.0}[prop["type"]]


def test_arguments_must_be_flat_and_names_unique() -> None:
    class Inner(BaseModel):
        a: int

    class Nested(ToolArgs):
        inner: Inner

    with pytest.raises(ValueError, match="flat"):
        _tool("nested", None, args=Nested)
    with pytest.raises(ValueError, match="twice"):
        ToolRegistry([TOOLS["read_file"], TOOLS["read_file"]])


# ---------------------------------------------------------------------------------------------- read-only subset


async def test_the_read_only_flag_decides_the_reviewer_subset(ctx: ToolContext, ws: Path) -> None:
    subset = TOOLS.read_only()
    assert subset.names == READ_ONLY
    assert all(t.read_only for t in subset) and not any(t.read_only for t in TOOLS if t.name not in READ_ONLY)
    assert [s["function"]["name"] for s in subset.schemas()] == list(READ_ONLY)

    text = _err(await subset.dispatch(ctx, "write_file", '{"path": "x", "content": "y"}'), "unknown_tool")
    assert "unknown tool 'write_file'" in text and "edit_file" not in text and "read_file" in text
    assert not (ws / "x").exists()

    async def noop(_ctx: ToolContext, _args: _Nothing) -> ToolOutput:
        return ToolOutput(True, "nothing changed")

    mixed = ToolRegistry([_tool("look", noop), _tool("touch", noop, read_only=False)])
    assert mixed.read_only().names == ("look",)


# ---------------------------------------------------------------------------------------------- dispatch


async def test_dispatch_runs_tools(ctx: ToolContext, ws: Path) -> None:
    out = await TOOLS.dispatch(ctx, "write_file", json.dumps({"path": "a/b.txt", "content": "hi\n"}))
    assert out.ok and (ws / "a" / "b.txt").read_text() == "hi\n"
    out = await TOOLS.dispatch(ctx, "read_file", '{"path": "a/b.txt", "offset": "1", "limit": 10.0}')
    assert out.ok and out.text == "   1| hi"
    out = await TOOLS.dispatch(ctx, "list_dir", "")
    assert out.ok and "a/" in out.text
    out = await TOOLS.dispatch(ctx, "grep", '{"pattern": "hi", "include": null}')
    assert out.data["matches"] == ["a/b.txt:1: hi"]
    out = await TOOLS.dispatch(ctx, "glob", {"pattern": "**/*.txt"})
    assert out.data["paths"] == ["a/b.txt"]
    out = await TOOLS.dispatch(ctx, "edit_file", {"path": "a/b.txt", "old": "hi", "new": "ho"})
    assert out.ok and (ws / "a" / "b.txt").read_text() == "ho\n"


async def test_lenient_binding(ctx: ToolContext) -> None:
    twice = json.dumps(json.dumps({"path": "src/main.py", "limit": 1}))  # arguments encoded twice
    assert (await TOOLS.dispatch(ctx, "read_file", twice)).text.splitlines()[0] == "   1| import pkg"
    for empty in ("", "  ", "null", None, {}):
        assert (await TOOLS.dispatch(ctx, "list_dir", empty)).data["entries"] == ["src/"]
    out = await TOOLS.dispatch(ctx, "read_file", '{"path": "src/main.py", "offset": null, "limit": 2.0}')
    assert out.data["offset"] == 1 and out.data["lines"] == 2  # null optional → its default
    assert bind(TOOLS["read_file"], {"path": "p", "offset": " 5 "}).offset == 5


async def test_dispatch_malformed_json(ctx: ToolContext) -> None:
    text = _err(await TOOLS.dispatch(ctx, "read_file", '{"path": "src/main.py"'), "invalid_json")
    assert text.startswith("Error: read_file: arguments are not valid JSON") and "one JSON object" in text
    text = _err(await TOOLS.dispatch(ctx, "read_file", '["src/main.py"]'), "invalid_arguments")
    assert "JSON object" in text and "got an array" in text
    assert "got a string" in _err(await TOOLS.dispatch(ctx, "read_file", '"src/main.py"'), "invalid_arguments")


async def test_dispatch_unknown_tool_lists_the_tools(ctx: ToolContext) -> None:
    text = _err(await TOOLS.dispatch(ctx, "delete_everything", "{}"), "unknown_tool")
    for name in TOOLS.names:
        assert name in text


async def test_dispatch_wrong_or_missing_arguments(ctx: ToolContext) -> None:
    async def run(name: str, raw: str) -> str:
        return _err(await TOOLS.dispatch(ctx, name, raw), "invalid_arguments")

    assert "read_file: missing required argument(s) 'path'" in await run("read_file", "{}")
    assert "missing required argument(s) 'path'" in await run("read_file", '{"path": null}')
    assert "missing required argument(s) 'old'" in await run("edit_file", '{"path": "src/main.py", "new": "a"}')
    text = await run("read_file", '{"file": "src/main.py"}')
    assert "unexpected argument(s) 'file'; it accepts 'path', 'offset', 'limit'" in text
    assert "argument 'path' must be a string, got the number 3" in await run("read_file", '{"path": 3}')
    text = await run("read_file", '{"path": "src/main.py", "offset": "first"}')
    assert "argument 'offset' must be an integer, got a string" in text
    text = await run("read_file", '{"path": "src/main.py", "limit": true}')
    assert "argument 'limit' must be an integer, got a boolean" in text
    assert "greater than or equal to 1, got 0" in await run("read_file", '{"path": "src/main.py", "offset": 0}')
    text = await run("register_outcome", '{"type": "media", "label": "x"}')
    assert "argument 'type' must be 'file', 'text', 'url' or 'json', got 'media'" in text


async def test_tool_failures_reach_the_model_with_their_kind(ctx: ToolContext) -> None:
    text = _err(await TOOLS.dispatch(ctx, "read_file", '{"path": "../../etc/passwd"}'), "sandbox")
    assert "'..' is not allowed" in text and "root:" not in text
    out = await TOOLS.dispatch(ctx, "read_file", '{"path": "nope.txt"}')
    assert _err(out, "not_found") and out.data["tool"] == "read_file"


async def test_a_handler_that_raises_becomes_an_error_result(ctx: ToolContext) -> None:
    async def broken(_ctx: ToolContext, _args: _Nothing) -> ToolOutput:
        raise RuntimeError("bug in the tool")

    async def refusing(_ctx: ToolContext, _args: _Nothing) -> ToolOutput:
        raise ToolError("not today", "refused")

    async def disk(_ctx: ToolContext, _args: _Nothing) -> ToolOutput:
        raise PermissionError(13, "Permission denied")

    reg = ToolRegistry([_tool("broken", broken), _tool("refusing", refusing), _tool("disk", disk)])
    text = _err(await reg.dispatch(ctx, "broken", "{}"), "internal")
    assert text == "Error: broken failed unexpectedly: RuntimeError: bug in the tool"
    assert _err(await reg.dispatch(ctx, "refusing", "{}"), "refused") == "Error: not today"
    assert _err(await reg.dispatch(ctx, "disk", "{}"), "io") == "Error: disk failed: Permission denied"
    text = _err(await reg.dispatch(ctx, "refusing", '{"n": 1}'), "invalid_arguments")
    assert "it accepts no arguments" in text


async def test_cancellation_propagates_through_dispatch(ctx: ToolContext) -> None:
    started: list[int] = []

    async def slow(_ctx: ToolContext, args: _Count) -> ToolOutput:
        started.append(args.n)
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    reg = ToolRegistry([_tool("slow", slow, args=_Count)])
    returned: list[ToolOutput] = []
    with anyio.CancelScope() as scope:
        scope.cancel()
        returned.append(await reg.dispatch(ctx, "slow", '{"n": 2}'))
    assert scope.cancelled_caught and started == [2] and returned == []


# ---------------------------------------------------------------------------------------------- context


async def test_register_outcome_goes_to_the_context_sink(ws: Path) -> None:
    (ws / "report.md").write_text("# Report\n")
    got: list[dict[str, Any]] = []
    ctx = ToolContext(ws, outcome_sink=lambda o: got.append(dict(o)))
    out = await TOOLS.dispatch(ctx, "register_outcome", {"type": "file", "label": " Report ", "path": "report.md"})
    assert out.ok and out.text == "registered file outcome 'Report': report.md"
    out = await TOOLS.dispatch(ctx, "register_outcome", {"type": "json", "label": "Stats", "value": {"n": 1}})
    assert out.ok  # the object itself instead of JSON text is accepted
    _err(await TOOLS.dispatch(ctx, "register_outcome", {"type": "file", "label": "X", "path": "../x"}), "sandbox")
    _err(await TOOLS.dispatch(ctx, "register_outcome", {"type": "url", "label": "X", "value": "ftp://x"}))
    _err(await TOOLS.dispatch(ctx, "register_outcome", {"type": "text", "label": "  ", "value": "x"}))
    assert got == [{"type": "file", "label": "Report", "value": "report.md", "path": "report.md"},
                   {"type": "json", "label": "Stats", "value": {"n": 1}}]
    # without a sink a declaration is still validated and described
    assert (await TOOLS.dispatch(ToolContext(ws), "register_outcome", '{"type": "text", "label": "a", '
                                 '"value": "b"}')).data["outcome"] == {"type": "text", "label": "a", "value": "b"}


async def test_run_command_uses_the_context(ws: Path) -> None:
    ctx = ToolContext(ws, env_marker=("POLPO_TEST_MARK", "attempt-9"), command_timeout=1.0)
    out = await TOOLS.dispatch(ctx, "run_command", {"command": "pwd; echo $POLPO_TEST_MARK"})
    assert out.ok and out.text.splitlines()[2:4] == [str(ctx.sandbox.root), "attempt-9"]
    out = await TOOLS.dispatch(ctx, "run_command", {"command": "sleep 5", "timeout": "600"})
    assert _err(out, "timeout").startswith("Error: the command timed out after 1 s")  # capped by the context
