"""The docs' coding-agent CLI examples (docs/how-to/coding-clis.md) are valid config, and run through the command-agent adapter.

The real tools are not installed here: each test puts a small fake CLI of the same name first on PATH. It
records its argv, cwd and stdin, does the work the prompt asks for, and (for the timeout test) hangs with
a child process, which must be killed with its whole group.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path

import anyio
import pytest

from polpo.config import parse_config
from tests.support.daemon import mission_json, running_daemon, submit, write_config
from tests.support.doc_examples import blocks

pytestmark = pytest.mark.anyio

FAKE_CLI = r"""#!/usr/bin/env python3
import json, os, sys, subprocess, time
record = {"argv": sys.argv, "cwd": os.getcwd(), "stdin": sys.stdin.read()}
with open("cli-call.json", "w") as f:
    json.dump(record, f)
prompt = " ".join(sys.argv[1:])
if "HANG" in prompt:
    child = subprocess.Popen(["sleep", "300"])
    with open("child.pid", "w") as f:
        f.write(str(child.pid))
    time.sleep(300)
with open("hello.py", "w") as f:
    f.write("print('hello')\n")
print("wrote hello.py")
"""


def readme_agents() -> dict[str, dict[str, object]]:
    agents: dict[str, dict[str, object]] = {}
    for block in blocks("toml"):  # the README's and the docs' (docs/how-to/coding-clis.md, agents.md, providers.md)
        agents.update(tomllib.loads(block.body).get("agents", {}))
    return agents


def readme_mcp_servers() -> dict[str, object]:
    """The ``[mcp.servers.NAME]`` the docs' agents name (docs/how-to/mcp.md declares them in blocks of their own)."""
    servers: dict[str, object] = {}
    for block in blocks("toml"):
        servers.update(tomllib.loads(block.body).get("mcp", {}).get("servers", {}))
    return servers


def test_every_readme_agent_example_is_valid_config(tmp_path: Path) -> None:
    agents = readme_agents()
    assert {"claude", "codex", "aider", "coder", "shell"} <= set(agents)
    cfg = parse_config({"agents": agents, "mcp": {"servers": readme_mcp_servers()}}, tmp_path / "polpo.toml")
    assert cfg.agents["claude"].command is not None and "{prompt}" in cfg.agents["claude"].command
    assert cfg.agents["coder"].type == "llm"


def _fake_bin(tmp_path: Path, names: list[str]) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in names:
        p = bin_dir / name
        p.write_text(FAKE_CLI)
        p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir


def _agents_toml(names: list[str], timeout: float) -> str:
    agents = readme_agents()
    out = []
    for name in names:
        argv = json.dumps(agents[name]["command"])
        out.append(f'[agents.{name}]\ntype = "command"\ncommand = {argv}\ntimeout = {timeout}\n')
    return "\n".join(out)


@pytest.mark.parametrize("name", ["claude", "codex", "aider"])
async def test_readme_cli_runs_in_the_workspace_with_the_prompt(tmp_path: Path, name: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = _fake_bin(tmp_path, [name])
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    cfg = parse_config(tomllib.loads(write_config(tmp_path, agents=_agents_toml([name], 30)).read_text()),
                       tmp_path / "config" / "polpo.toml")
    task = {"title": "Say hello", "description": "Create hello.py printing hello.", "assignTo": name,
            "expectations": [{"type": "file_exists", "path": "hello.py"},
                             {"type": "test", "command": "python3 hello.py | grep -q hello"}]}
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "cli.json", mission_json(task))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "completed"
    ws = cfg.state_dir / "workspaces" / "cli"
    call = json.loads((ws / "cli-call.json").read_text())
    assert Path(call["cwd"]).resolve() == ws.resolve()
    prompt_args = [a for a in call["argv"] if "Create hello.py printing hello." in a]
    assert len(prompt_args) == 1, call["argv"]  # the prompt is one argument, not split by a shell
    assert "Say hello" in prompt_args[0]
    assert json.loads(call["stdin"])["title"] == "Say hello"


async def test_a_hanging_cli_is_killed_with_its_children_on_timeout(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = _fake_bin(tmp_path, ["claude"])
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    cfg = parse_config(tomllib.loads(write_config(tmp_path, agents=_agents_toml(["claude"], 1)).read_text()),
                       tmp_path / "config" / "polpo.toml")
    task = {"title": "HANG", "description": "HANG forever", "assignTo": "claude", "maxRetries": 0}
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "hang.json", mission_json(task))
        done = await w.wait_event("mission:completed")
    assert done.data["outcome"] == "failed"
    assert w.of("task:timeout")
    child = int((cfg.state_dir / "workspaces" / "hang" / "child.pid").read_text())
    with anyio.fail_after(5):
        while _alive(child):
            await anyio.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat_path = Path(f"/proc/{pid}/stat")
    try:
        return stat_path.read_text().split(")")[-1].split()[0] != "Z"  # a zombie is dead
    except OSError:
        return False
