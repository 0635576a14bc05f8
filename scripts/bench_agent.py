"""Per-turn overhead of the LLM agent: a scripted session against FakeLLM, run through LLMAgent directly.

Usage: .venv/bin/python scripts/bench_agent.py [--runs 5] [--turns 20] [--delay 0.02] [--keep-nagle]

Each session has ``--turns`` model calls: ``turns - 1`` tool calls alternating write_file / read_file (so tool
dispatch, the sandbox and the transcript are included), then a final text answer. FakeLLM (in-process, over real
HTTP on 127.0.0.1) waits ``--delay`` seconds before each reply, standing in for the model's own time.

    overhead per turn = (session wall time − the server's scripted delays) / turns

It counts everything that is not the model thinking: the agent loop, tool dispatch, redaction and transcript,
LLMClient, litellm building the request and parsing the answer, HTTP on loopback, and FakeLLM's own JSON work
(which shares the GIL with the agent, so the number is an upper bound). The first session is a warm-up (litellm
import, connection set-up) and is not counted. Goal: ≤ 5 ms per turn (median over runs).

FakeLLM writes its headers and body in two send() calls; with Nagle's algorithm on, the second waits for the
client's delayed ACK (~40 ms on Linux loopback), a test-server artefact that would swamp the measure. The bench
turns Nagle off on the server's sockets unless ``--keep-nagle`` is given.
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
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import anyio
import httpx

from polpo.agents.base import AgentRequest, AgentResult
from polpo.agents.llm import LLMAgent
from polpo.clock import SystemClock
from polpo.llm.client import ChatReply, LLMClient, ModelSettings, ToolCallOut
from tests.support import fake_llm
from tests.support.fake_llm import FakeLLM, delay, text, tool_call

GOAL_MS = 5.0


def script(srv: FakeLLM, turns: int, seconds: float) -> None:
    """``turns - 1`` tool calls (write, then read back what was written), then the final answer."""
    replies: list[fake_llm.Reply] = []
    for i in range(turns - 1):
        if i % 2 == 0:
            call = tool_call("write_file", {"path": f"src/f{i}.py", "content": f"x = {i}\n" * 20})
        else:
            call = tool_call("read_file", {"path": f"src/f{i - 1}.py"})
        replies.append(delay(seconds, call))
    replies.append(delay(seconds, text("done")))
    srv.script(*replies)


def request(workspace: Path, n: int) -> AgentRequest:
    return AgentRequest(
        task_id=f"bench/t{n}", mission_id="bench", mission_name="bench", attempt_id=f"bench/t{n}/1",
        attempt_number=1, kind="initial", title="bench", description="write and read files", prompt="",
        feedback=None, workspace=workspace, timeout=120.0, expectations=[], env_marker=("POLPO_BENCH_MARK", str(n)),
    )


async def one_session(agent: LLMAgent, srv: FakeLLM, turns: int, seconds: float, n: int) -> dict[str, float]:
    script(srv, turns, seconds)
    with tempfile.TemporaryDirectory(prefix="polpo-bench-agent-") as tmp:
        t0 = time.perf_counter()
        result: AgentResult = await agent.run(request(Path(tmp), n), on_start=lambda _pid: None)
        wall = time.perf_counter() - t0
    if not result.ok or srv.pending or srv.unscripted:
        raise SystemExit(f"session {n} failed: {result.error or result.stderr_tail} "
                         f"(pending {srv.pending}, unscripted {srv.unscripted})")
    calls = sum(e["duration"] for e in result.transcript or [] if e["type"] == "assistant")
    served = turns * seconds
    return {
        "wall": wall,
        "overhead_ms": (wall - served) / turns * 1000,
        "client_ms": (calls - served) / turns * 1000,  # LLMClient + litellm + HTTP + FakeLLM
        "agent_ms": (wall - calls) / turns * 1000,  # the loop: tools, redaction, transcript
    }


class ScriptedClient(LLMClient):
    """Answers from a list, with no litellm and no HTTP: isolates the agent loop's own cost."""

    def __init__(self, turns: int) -> None:
        super().__init__()
        self.turns = turns
        self.replies: list[ChatReply] = []

    def load(self) -> None:
        self.replies = []
        for i in range(self.turns - 1):
            if i % 2 == 0:
                args = json.dumps({"path": f"src/f{i}.py", "content": f"x = {i}\n" * 20})
                call = ToolCallOut(f"call_{i}", "write_file", args)
            else:
                call = ToolCallOut(f"call_{i}", "read_file", json.dumps({"path": f"src/f{i - 1}.py"}))
            self.replies.append(ChatReply(None, [call], "tool_calls", "stub", 100, 10))
        self.replies.append(ChatReply("done", [], "stop", "stub", 100, 1))
        self.replies.reverse()

    async def chat(self, settings: ModelSettings, messages: Any, **kwargs: Any) -> ChatReply:
        return self.replies.pop()


async def agent_alone(turns: int, runs: int) -> float:
    """Median ms per turn of LLMAgent with :class:`ScriptedClient`."""
    client = ScriptedClient(turns)
    agent = LLMAgent("bench", ModelSettings("stub"), client=client, clock=SystemClock(), max_turns=turns + 1)
    times = []
    for n in range(runs + 1):
        client.load()
        with tempfile.TemporaryDirectory(prefix="polpo-bench-agent-") as tmp:
            t0 = time.perf_counter()
            result = await agent.run(request(Path(tmp), n), on_start=lambda _pid: None)
            times.append((time.perf_counter() - t0) / turns * 1000)
        assert result.ok, result
    return statistics.median(times[1:])


async def http_floor(srv: FakeLLM, bodies: list[dict[str, Any]], seconds: float) -> float:
    """ms per request for the same request bodies POSTed with plain httpx: loopback HTTP + FakeLLM's own work."""
    srv.script(*(delay(seconds, text("x")) for _ in bodies))
    async with httpx.AsyncClient(base_url=srv.base_url, timeout=30) as client:
        await client.get("/models")  # open the connection outside the measure, as litellm's is
        t0 = time.perf_counter()
        for body in bodies:
            (await client.post("/chat/completions", json=body)).raise_for_status()
        wall = time.perf_counter() - t0
    return (wall - len(bodies) * seconds) / len(bodies) * 1000


async def bench(runs: int, turns: int, seconds: float, model: str) -> tuple[list[dict[str, float]], float, float]:
    alone = await agent_alone(turns, runs)
    with FakeLLM() as srv:
        settings = ModelSettings(model, api_base=srv.base_url, api_key_env="POLPO_BENCH_KEY")
        agent = LLMAgent("bench", settings, client=LLMClient(), clock=SystemClock(), max_turns=turns + 1)
        await one_session(agent, srv, turns, seconds, 0)  # warm-up: litellm import, connection
        rows = []
        for n in range(1, runs + 1):
            srv.reset()
            rows.append(await one_session(agent, srv, turns, seconds, n))
        bodies = [dict(r) for r in srv.requests]
        return rows, await http_floor(srv, bodies, seconds), alone


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--delay", type=float, default=0.02, help="server delay per reply, seconds")
    ap.add_argument("--model", default="openai/fake-model",
                    help="litellm model string sent to FakeLLM (e.g. openai/gpt-4o-mini to include cost lookup)")
    ap.add_argument("--keep-nagle", action="store_true", help="leave Nagle on in FakeLLM (adds ~40 ms per turn)")
    args = ap.parse_args()
    if args.turns < 2 or args.runs < 1:
        ap.error("--turns must be ≥ 2 and --runs ≥ 1")
    os.environ["POLPO_BENCH_KEY"] = "sk-bench-not-a-real-key"
    if not args.keep_nagle:
        fake_llm._Handler.disable_nagle_algorithm = True
    rows, floor, alone = anyio.run(bench, args.runs, args.turns, args.delay, args.model)

    print(f"{args.model}: {args.turns}-turn sessions, server delay {args.delay * 1000:.0f} ms/reply, {args.runs} runs "
          f"(+1 warm-up){'' if not args.keep_nagle else ', Nagle on'}")
    print(f"{'run':>4} {'wall s':>8} {'overhead ms/turn':>17} {'client+http ms':>15} {'agent loop ms':>14}")
    for i, r in enumerate(rows, 1):
        print(f"{i:>4} {r['wall']:>8.3f} {r['overhead_ms']:>17.2f} {r['client_ms']:>15.2f} {r['agent_ms']:>14.2f}")
    med = {k: statistics.median(r[k] for r in rows) for k in ("wall", "overhead_ms", "client_ms", "agent_ms")}
    verdict = "ok" if med["overhead_ms"] <= GOAL_MS else "OVER GOAL"
    print(f"median overhead {med['overhead_ms']:.2f} ms/turn = agent loop {med['agent_ms']:.2f} + LLMClient/litellm "
          f"{med['client_ms'] - floor:.2f} + HTTP/FakeLLM floor {floor:.2f}  goal ≤ {GOAL_MS:g} ms: {verdict}")
    print(f"agent loop alone (scripted client: no litellm, no HTTP): {alone:.2f} ms/turn")
    summary: dict[str, Any] = {
        "bench": "agent_turn_overhead", "turns": args.turns, "runs": args.runs, "server_delay_s": args.delay,
        "nagle": args.keep_nagle, "overhead_ms_per_turn": round(med["overhead_ms"], 3),
        "client_http_ms_per_turn": round(med["client_ms"], 3), "agent_loop_ms_per_turn": round(med["agent_ms"], 3),
        "http_floor_ms_per_turn": round(floor, 3), "litellm_ms_per_turn": round(med["client_ms"] - floor, 3),
        "agent_alone_ms_per_turn": round(alone, 3), "model": args.model,
        "wall_s": round(med["wall"], 4), "goal_ms": GOAL_MS, "ok": med["overhead_ms"] <= GOAL_MS,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
