"""A server's tools as a model's tools (polpo.mcp.tools): names a provider takes, what allow and deny show, the
schema check's messages, and results as the text a model reads."""

from __future__ import annotations

import mcp_types
import pytest

from polpo.mcp.tools import (
    MAX_RESULT_CHARS,
    McpTool,
    check_arguments,
    offered,
    result_text,
    tool_of,
    wire_names,
)
from polpo.tools.output import ToolError

SCHEMA = {"type": "object", "properties": {"repo_path": {"type": "string"}, "max_count": {"type": "integer"}},
          "required": ["repo_path"], "additionalProperties": False}


def t(name: str, server: str = "git", schema: dict[str, object] | None = None) -> McpTool:
    return McpTool(server, name, f"does {name}", dict(schema or SCHEMA))


def test_wire_names_are_what_providers_accept_unique_and_short() -> None:
    tools = [t("git_log"), t("get-env", "every"), t("a.b c", "odd"), t("x" * 80, "long"), t("log", "git_"),
             t("_log", "git")]
    wired = wire_names(tools, taken=["read_file"])
    assert list(wired)[:3] == ["git__git_log", "every__get-env", "odd__a_b_c"]
    assert all(len(n) <= 64 and n.replace("_", "").replace("-", "").isalnum() for n in wired)
    assert len(set(wired)) == len(tools)  # git_.log and git._log both come out git___log: one gets a hash
    assert [w.qualified for w in wired.values()] == [x.qualified for x in tools]
    [taken] = wire_names([t("x", "a")], taken=["a__x"])  # a built-in's name is never shadowed
    assert taken != "a__x" and taken.startswith("a__x_")


def test_allow_and_deny_take_names_and_globs() -> None:
    tools = [t("git_log"), t("git_commit"), t("git_status"), t("git_reset")]
    assert [x.name for x in offered(tools, [], [])] == ["git_log", "git_commit", "git_status", "git_reset"]
    assert [x.name for x in offered(tools, ["git_log", "git_s*"], [])] == ["git_log", "git_status"]
    assert [x.name for x in offered(tools, [], ["git_reset", "*commit"])] == ["git_log", "git_status"]
    assert [x.name for x in offered(tools, ["git_*"], ["git_log"])] == ["git_commit", "git_status", "git_reset"]


@pytest.mark.parametrize(("raw", "message"), [
    ({"max_count": 3}, "git.git_log: 'repo_path' is a required argument"),
    ({"repo_path": 5}, "git.git_log: argument 'repo_path' must be string, got the number 5"),
    ({"repo_path": ".", "depth": 1}, "(not an argument of this tool)"),
    ('{"repo_path": ', "git.git_log: arguments are not valid JSON"),
])
def test_arguments_are_checked_against_the_schema_with_the_argument_named(raw: object, message: str) -> None:
    with pytest.raises(ToolError) as caught:
        check_arguments(t("git_log"), raw)  # type: ignore[arg-type]
    assert message in str(caught.value)


def test_arguments_are_read_as_leniently_as_the_built_in_tools() -> None:
    assert check_arguments(t("git_log"), '"{\\"repo_path\\": \\".\\"}"') == {"repo_path": "."}  # encoded twice
    assert check_arguments(t("git_log"), {"repo_path": ".", "max_count": 2}) == {"repo_path": ".", "max_count": 2}


def test_a_listed_tool_gets_an_object_schema_a_cut_description_and_its_read_only_hint() -> None:
    listed = mcp_types.Tool(name="get-env", description="d" * 3000, input_schema={"type": "object"},
                            annotations=mcp_types.ToolAnnotations(read_only_hint=True))
    tool = tool_of("every", listed)
    assert tool.schema == {"type": "object", "properties": {}} and tool.read_only
    assert len(tool.description) < 2100 and tool.description.endswith("[…]")
    assert tool.function("every__get-env")["function"]["description"].startswith("[every (MCP server)] ddd")


def test_results_become_text_images_as_notes_and_long_ones_are_cut() -> None:
    content = [mcp_types.TextContent(type="text", text="line one"),
               mcp_types.ImageContent(type="image", data="A" * 400, mime_type="image/png"),
               mcp_types.EmbeddedResource(type="resource", resource=mcp_types.TextResourceContents(
                   uri="file:///w/a.txt", text="inside")),
               mcp_types.ResourceLink(type="resource_link", uri="https://x/y", name="y")]
    assert result_text(mcp_types.CallToolResult(content=content)) == (
        "line one\n[image image/png, 300 bytes: not shown]\n[resource file:///w/a.txt]\ninside\n[link https://x/y: y]")
    structured = mcp_types.CallToolResult(content=[], structured_content={"temperature": 21})
    assert result_text(structured) == '{"temperature": 21}'
    long = result_text(mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="x" * 150_000)]))
    assert long.startswith("x" * MAX_RESULT_CHARS) and long.endswith("50000 more characters of this result were "
                                                                     "cut; ask the tool for less]")
