"""The MCP how-to's example runs as written: its config (the git and filesystem servers, the agent that uses them)
and its mission, in a real daemon process, the provider played by the tests' OpenAI-compatible server, which
calls the tools as a model would — the git log, then the filesystem server's write — until the checks pass."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.support.daemon import DEFAULT_AGENTS, REPO, daemon_process, wait_events, write_config
from tests.support.doc_examples import blocks
from tests.support.fake_llm import FakeLLM, text, tool_call
from tests.support.mcp_servers import mcp_path, need_npm_servers

PAGE = REPO / "docs" / "how-to" / "mcp.md"


def page_block(lang: str, must: str) -> str:
    [b] = [b for b in blocks(lang) if b.file == PAGE and must in b.body]
    return b.body


def test_the_mcp_pages_mission_completes_through_the_git_and_filesystem_servers(tmp_path: Path) -> None:
    need_npm_servers()
    config = page_block("toml", "[mcp.servers.fs]")
    mission = page_block("json", '"name": "changelog"')

    def model(req: Any) -> Any:
        results = [str(m["content"]) for m in req["messages"] if m["role"] == "tool"]
        if not results:
            return tool_call("git__git_log", {"repo_path": ".", "max_count": 10})
        if len(results) == 1:
            lines = "".join(f"- {m}\n" for m in re.findall(r"^Message: (.*)$", results[0], re.M))
            return tool_call("fs__write_file", {"path": "CHANGES.md", "content": lines})
        return text("CHANGES.md lists the commits.")

    with FakeLLM(models=("docs-model",)) as srv:
        srv.responder = model
        agents = DEFAULT_AGENTS + config.replace(
            'model = "openai/gpt-4o-mini"\napi_key_env = "OPENAI_API_KEY"',
            f'model = "openai/docs-model"\napi_base = "{srv.base_url}"\napi_key_env = "DOCS_MCP_KEY"\n'
            "timeout = 300")  # the endpoint, and room for the first start of two servers on a loaded machine
        assert "docs-model" in agents, "the page's agent block changed: update this test"
        cfg = write_config(tmp_path, agents=agents)
        (tmp_path / "missions" / "changelog.json").write_text(mission)
        with daemon_process(cfg, env={"DOCS_MCP_KEY": "sk-docs-mcp", "PATH": mcp_path()}):
            evs = wait_events(tmp_path / "state", lambda es: any(e["event"] == "mission:completed" for e in es),
                              timeout=120)
    done = next(e for e in evs if e["event"] == "mission:completed")
    assert done["data"]["outcome"] == "completed", [e for e in evs if e["event"].startswith("assessment")]
    ws = tmp_path / "state" / "workspaces" / "changelog"
    assert (ws / "CHANGES.md").read_text() == "- add the calculator\n"
    finished = [e["data"] for e in evs if e["event"] == "agent:finished" and e["data"]["agentName"] == "coder"]
    assert [f.get("mcp") for f in finished] == [{
        "git": {"calls": 1, "errors": 0, "seconds": finished[0]["mcp"]["git"]["seconds"]},
        "fs": {"calls": 1, "errors": 0, "seconds": finished[0]["mcp"]["fs"]["seconds"]}}], finished
