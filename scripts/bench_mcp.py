"""What MCP servers cost an LLM agent: a turn with servers configured but unused, and one call over stdio.

Usage: .venv/bin/python scripts/bench_mcp.py [--runs 5] [--turns 20] [--calls 50]

The model is a scripted client (no litellm, no HTTP), so what is measured is polpo's own work:

* **unused**: sessions of ``--turns`` built-in tool calls (write_file / read_file, as scripts/bench_agent.py) by an
  agent without MCP servers and by the same agent with two stdio servers configured (mcp-server-time from PyPI,
  the tests' minimal server) whose tools the model is shown but never calls, interleaved. The first session of the
  agent with servers starts them once to learn their tools (the daemon keeps the list): reported apart, not
  counted. Measured in CPU time (the process's, its worker threads' included), which a loaded machine does not
  blur as it blurs wall time; wall time is printed too. Goal: the median CPU ms per turn with servers is no more
  than without (+0.05 ms, the measure's noise).
* **one call**: ``--calls`` calls of mcp-server-time's ``get_current_time`` in one session (the first one starts
  the server: reported apart) against as many built-in ``read_file`` calls; ms per call, each side's median of
  ``--runs`` sessions. The MCP call's time is stdio, the SDK's JSON-RPC, the server's own work (a Python
  process), the schema check and the result's text; the built-in call's is a read in a worker thread. The tests'
  minimal server (tests/support/mcp_faulty.py, mode ok: no work) shows the transport's and the SDK's share.

Needs mcp-server-time on the PATH (or in this venv: the dev lock installs it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anyio

from polpo.agents.base import AgentRequest, AgentResult
from polpo.agents.llm import LLMAgent
from polpo.agents.toolbox import base_tools
from polpo.clock import SystemClock
from polpo.config_tools import McpServerSettings
from polpo.llm.client import ChatReply, LLMClient, ModelSettings, ToolCallOut
from polpo.mcp.pool import McpAgent, McpPool
from tests.support.mcp_servers import faulty_command, mcp_path

NOISE_MS = 0.05


class Scripted(LLMClient):
    """Answers from a list of tool calls, then "done": the agent loop's cost alone."""

    def __init__(self) -> None:
        super().__init__()
        self.replies: list[ChatReply] = []

    def load(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self.replies = [ChatReply(None, [ToolCallOut(f"c{i}", name, json.dumps(args))], "tool_calls", "stub", 100, 10)
                        for i, (name, args) in enumerate(calls)]
        self.replies.append(ChatReply("done", [], "stop", "stub", 100, 1))
        self.replies.reverse()

    async def chat(self, settings: ModelSettings, messages: Any, **kwargs: Any) -> ChatReply:
        return self.replies.pop()


def files_calls(turns: int) -> list[tuple[str, dict[str, Any]]]:
    return [("write_file", {"path": f"src/f{i}.py", "content": f"x = {i}\n" * 20}) if i % 2 == 0 else
            ("read_file", {"path": f"src/f{i - 1}.py"}) for i in range(turns - 1)]


def request(ws: Path, n: int) -> AgentRequest:
    return AgentRequest(task_id=f"bench/t{n}", mission_id="bench", mission_name="bench", attempt_id=f"bench/t{n}/1",
                        attempt_number=1, kind="initial", title="bench", description="bench", prompt="",
                        feedback=None, workspace=ws, timeout=300.0, expectations=[],
                        env_marker=("POLPO_BENCH_MARK", str(n)))


async def session(agent: LLMAgent, client: Scripted, calls: list[tuple[str, dict[str, Any]]],
                  n: int) -> tuple[float, AgentResult, float]:
    """(wall seconds, the result, CPU seconds) of one session."""
    client.load(calls)
    with tempfile.TemporaryDirectory(prefix="polpo-bench-mcp-") as tmp:
        (Path(tmp) / "README").write_text("hello\n" * 20)
        t0, c0 = time.perf_counter(), time.process_time()
        result = await agent.run(request(Path(tmp), n), on_start=lambda _pid: None)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if not result.ok:
        raise SystemExit(f"session {n} failed: {result.error or result.stderr_tail}")
    return wall, result, cpu


def agent_with(client: Scripted, servers: dict[str, McpServerSettings] | None, pool: McpPool | None) -> LLMAgent:
    mcp = McpAgent("bench", list(servers), pool, taken=base_tools(False).names) if servers and pool else None
    return LLMAgent("bench", ModelSettings("stub"), client=client, clock=SystemClock(), max_turns=10_000, mcp=mcp)


async def bench(runs: int, turns: int, calls: int) -> dict[str, Any]:
    command, args = faulty_command("ok")
    servers = {"time": McpServerSettings(command="mcp-server-time", args=["--local-timezone", "UTC"]),
               "tiny": McpServerSettings(command=command, args=args)}
    with tempfile.TemporaryDirectory(prefix="polpo-bench-mcp-state-") as state:
        pool = McpPool(servers, Path(state))
        client = Scripted()
        plain, with_mcp = agent_with(client, None, None), agent_with(client, servers, pool)
        await session(plain, client, files_calls(turns), 0)  # warm-up
        t0 = time.perf_counter()
        await session(with_mcp, client, files_calls(turns), 0)  # learns the servers' tools (kept by the pool)
        discovery = time.perf_counter() - t0
        without, unused, without_wall, unused_wall = [], [], [], []
        for n in range(1, runs + 1):  # interleaved, so a load change hits both sides alike
            wall, _, cpu = await session(plain, client, files_calls(turns), n)
            without.append(cpu / turns * 1000)
            without_wall.append(wall / turns * 1000)
            wall, result, cpu = await session(with_mcp, client, files_calls(turns), n)
            assert result.mcp is None  # no server started: the model called none of their tools
            unused.append(cpu / turns * 1000)
            unused_wall.append(wall / turns * 1000)
        builtin_call, mcp_call, first, tiny_call = [], [], [], []
        for n in range(runs):
            wall, result, _ = await session(with_mcp, client, [("tiny__work", {"x": "a"})] * calls, n)
            start = float(next(e for e in result.transcript or [] if e["type"] == "tool")["data"]["seconds"])
            tiny_call.append((wall - start) / (calls + 1) * 1000)
            wall, _, _ = await session(plain, client, [("read_file", {"path": "README"})] * calls, n)
            builtin_call.append(wall / (calls + 1) * 1000)
            wall, result, _ = await session(with_mcp, client,
                                            [("time__get_current_time", {"timezone": "UTC"})] * calls, n)
            seconds = [float(e["data"]["seconds"]) for e in result.transcript or [] if e["type"] == "tool"]
            first.append(seconds[0] * 1000)
            mcp_call.append((wall - seconds[0]) / (calls + 1) * 1000)  # a turn, less the first call's start
    return {"discovery_s": discovery, "without": statistics.median(without), "unused": statistics.median(unused),
            "without_min": min(without), "unused_min": min(unused),
            "without_wall": statistics.median(without_wall), "unused_wall": statistics.median(unused_wall),
            "builtin_call": statistics.median(builtin_call), "mcp_call": statistics.median(mcp_call),
            "tiny_call": statistics.median(tiny_call),
            "first_call": statistics.median(first)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--calls", type=int, default=50)
    a = ap.parse_args()
    os.environ["PATH"] = mcp_path()
    r = anyio.run(bench, a.runs, a.turns, a.calls)
    ok = r["unused"] <= r["without"] + NOISE_MS
    print(f"a turn of built-in calls, {a.turns}-turn sessions, median of {a.runs}:")
    print(f"  without MCP servers        {r['without']:.3f} CPU ms/turn  ({r['without_wall']:.2f} wall)")
    print(f"  with 2 servers, unused     {r['unused']:.3f} CPU ms/turn  ({r['unused_wall']:.2f} wall)   "
          f"goal: no more (±{NOISE_MS} ms): {'ok' if ok else 'OVER'}")
    print(f"  (the fastest session of each: {r['without_min']:.3f} and {r['unused_min']:.3f} CPU ms/turn)")
    print(f"  first session with them: {r['discovery_s']:.2f} s (starts each server once to learn its tools)")
    print(f"one call ({a.calls} a session, median of {a.runs}):")
    print(f"  built-in read_file                       {r['builtin_call']:.2f} ms/turn")
    print(f"  mcp-server-time get_current_time (stdio) {r['mcp_call']:.2f} ms/turn  "
          f"(+{r['mcp_call'] - r['builtin_call']:.2f} ms a call)")
    print(f"  the tests' minimal server's work (stdio)  {r['tiny_call']:.2f} ms/turn  "
          f"(+{r['tiny_call'] - r['builtin_call']:.2f} ms a call: the transport and the SDK alone)")
    print(f"  mcp-server-time's first call in an attempt (starts the server): {r['first_call']:.0f} ms")
    print(json.dumps({"bench": "mcp", "turns": a.turns, "runs": a.runs, "calls": a.calls,
                      **{k: round(v, 3) for k, v in r.items()}, "ok": ok}))


if __name__ == "__main__":
    main()
