"""Review panel wall time: three reviewers in parallel vs. one reviewer doing the same work, against FakeLLM.

Usage: .venv/bin/python scripts/bench_panel.py [--runs 5] [--delay 0.1] [--keep-nagle]
       [--budget [memory|sqlite|postgres]]

``--budget`` runs every call under a task's turn meter with a task, a mission and a daily budget (the engine's
real :class:`~polpo.engine.spend_book.SpendBook` on a store whose writer runs: memory by default, a SQLite file,
or a private PostgreSQL server): each call is estimated, priced, checked, its estimate held in the store before
it is sent (one commit), counted and written, as in the daemon.

Every reviewer follows the same script, each reply held ``--delay`` seconds by FakeLLM (standing in for the
model's own time): phase 1 reads a file, greps, then writes its analysis (3 calls, with real tool dispatch on a
real workspace), phase 2 answers with its scores as JSON text, the first scoring strategy (1 call). So one
reviewer makes ``SEQUENTIAL_CALLS`` = 4 calls in a row, and the 3-reviewer panel 12 calls, still 4 deep. The
panel's evidence gathering (a scratch copy of the workspace, the task's stated examples looked for: it states
none here) runs once per panel and counts as panel code.

    ratio                  = median wall(3-reviewer panel) / median wall(1 reviewer)          goal ≤ 1.3
    overhead per judge call = (wall − 4 × delay) / calls, median                               reported
    polpo's own share       = reviewer/panel code + LLMClient around litellm, per call          goal ≤ 1 ms

The whole overhead's old goal (≤ 5 ms) is still printed for comparison, but it is no longer what ``ok`` means:
litellm alone takes several ms per call on this path (3.5–6.3 ms here; 6.9–11.3 ms measured for
issue 13) and is kept, so the goal is on polpo's own share,
and litellm's share is reported so a lighter litellm path can be taken when one exists.

The overhead is reported for the single reviewer (4 calls: the latency each call adds) and for the panel (per
call over its 12 calls, and per sequential step). It counts everything that is not the model thinking:
run_panel/run_reviewer, prompts, tool dispatch, redaction, LLMClient, litellm building the request and parsing
the answer, loopback HTTP, and FakeLLM's own JSON work (same process, same GIL: an upper bound). For the single
reviewer it is split (the read-only tools' own work — reading and grepping the workspace — is timed apart): time outside ``LLMClient.chat`` (the reviewer and panel code), inside it minus the HTTP
floor (LLMClient + litellm), and the floor itself (the same request bodies POSTed in a row with plain httpx). The first round (litellm import,
connections) is a warm-up and not counted. FakeLLM's Nagle/delayed-ACK artefact (~40 ms per reply on Linux
loopback, see bench_agent.py) is turned off unless ``--keep-nagle``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import anyio
import httpx

from polpo.llm.client import ChatReply, LLMClient, ModelSettings, load_litellm
from polpo.review import explore as explore_module
from polpo.review import score_prompts
from polpo.review.dimensions import Dim
from polpo.review.panel import PanelResult, ReviewContext, run_panel
from tests.support import fake_llm
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, delay, text, tool_call

RATIO_GOAL = 1.3
OVERHEAD_GOAL_MS = 5.0
OWN_GOAL_MS = 1.0  # polpo's share: reviewer/panel code + LLMClient, without litellm and HTTP
SEQUENTIAL_CALLS = 4  # read_file, grep, analysis, scores
MODELS = ("fake-a", "fake-b", "fake-c")
KEY_ENV = "POLPO_BENCH_PANEL_KEY"
DIMS = [Dim("correctness", 0.4, "It works"), Dim("tests", 0.3, "It is tested"), Dim("clarity", 0.3, "Readable")]
ANALYSIS = ("correctness: add and div are right (src/calc.py:1-5), div by zero unhandled (src/calc.py:5). "
            "tests: one test for add (tests/test_calc.py:4). clarity: short, named well.")


def responder(seconds: float) -> fake_llm.Responder:
    """The same scripted reviewer for every model: read, grep, analyse, then score; each reply delayed."""
    def answer(req: RecordedRequest) -> Reply:
        tools = {t["function"]["name"] for t in req.get("tools") or []}
        if "read_file" in tools:
            turn = sum(1 for m in req["messages"] if m["role"] == "assistant")
            if req.get("tool_choice") == "none" or turn >= 2:
                reply: Reply = text(ANALYSIS)
            elif turn == 0:
                reply = tool_call("read_file", {"path": "src/calc.py"})
            else:
                reply = tool_call("grep", {"pattern": "def test_"})
        elif not tools and req["messages"][0]["content"] == score_prompts.SCORING_SYSTEM:
            reply = text(json.dumps({
                "scores": [{"dimension": d.name, "reasoning": f"{d.name}: fine", "score": 4,
                            "evidence": [{"file": "src/calc.py", "line": 5, "note": "div"}]} for d in DIMS],
                "summary": "fine", "suggestions": ["handle b == 0"]}))
        else:
            raise AssertionError(f"unexpected request: {req.get('tools')}")
        return delay(seconds, reply)
    return answer


class TimedClient(LLMClient):
    """LLMClient that adds up the time spent inside chat() and, within it, inside ``litellm.acompletion``
    (meaningful for one reviewer: its calls are serial)."""

    spent = 0.0
    in_litellm = 0.0

    async def chat(self, settings: ModelSettings, messages: Sequence[dict[str, Any]], **kwargs: Any) -> ChatReply:
        t0 = time.perf_counter()
        try:
            return await super().chat(settings, messages, **kwargs)
        finally:
            self.spent += time.perf_counter() - t0


class TimedTools:
    """The reviewers' read-only tools, timed: reading and grepping the workspace is work the reviewer asked for,
    not overhead of a judge call, so it is reported apart."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.spent = 0.0

    def schemas(self) -> Any:
        return self.inner.schemas()

    async def dispatch(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await self.inner.dispatch(*args, **kwargs)
        finally:
            self.spent += time.perf_counter() - t0


TOOLS_TIMER = TimedTools(explore_module.REVIEW_TOOLS)
explore_module.REVIEW_TOOLS = TOOLS_TIMER  # the exploring reviewer looks it up at each call


async def time_litellm(client: TimedClient) -> None:
    """Wrap ``litellm.acompletion`` (the module LLMClient calls) so the time inside it is added up."""
    litellm = await load_litellm()
    inner = litellm.acompletion

    async def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await inner(*args, **kwargs)
        finally:
            client.in_litellm += time.perf_counter() - t0
    litellm.acompletion = timed


def workspace(root: Path) -> ReviewContext:
    (root / "src").mkdir()
    (root / "tests").mkdir()
    (root / "src" / "calc.py").write_text("def add(a, b):\n    return a + b\n\n\ndef div(a, b):\n    return a / b\n")
    (root / "tests" / "test_calc.py").write_text("from src.calc import add\n\n\ndef test_add():\n"
                                                 "    assert add(1, 2) == 3\n")
    return ReviewContext(title="Calculator", description="Write add() and div() with tests.",
                         criteria="Both work and are tested.", workspace=root,
                         files_changed=["src/calc.py", "tests/test_calc.py"], timeline="agent ran; exit 0")


async def timed(client: TimedClient, models: list[ModelSettings], ctx: ReviewContext,
                srv: FakeLLM) -> tuple[float, list[RecordedRequest]]:
    """(wall seconds, the requests it made) of one run_panel; exits if the run did not go as scripted."""
    before = len(srv.requests)
    client.spent = client.in_litellm = TOOLS_TIMER.spent = 0.0
    t0 = time.perf_counter()
    result: PanelResult = await run_panel(client, models, ctx, DIMS, 3.0)
    wall = time.perf_counter() - t0
    made = srv.requests[before:]
    if not result.passed or not all(r.ok for r in result.reviewers) or len(made) != SEQUENTIAL_CALLS * len(models):
        raise SystemExit(f"bench run went wrong: passed={result.passed}, calls={len(made)}, "
                         f"errors={[r.error for r in result.reviewers]}")
    return wall, made


async def http_floor(srv: FakeLLM, bodies: list[Mapping[str, Any]], seconds: float) -> float:
    """ms per request for the same bodies POSTed in a row with plain httpx: loopback HTTP + FakeLLM's work."""
    srv.reset()
    srv.script(*(delay(seconds, text("x")) for _ in bodies))
    async with httpx.AsyncClient(base_url=srv.base_url, timeout=30) as client:
        await client.get("/models")
        t0 = time.perf_counter()
        for body in bodies:
            (await client.post("/chat/completions", json=dict(body))).raise_for_status()
        wall = time.perf_counter() - t0
    return (wall - len(bodies) * seconds) / len(bodies) * 1000


@contextlib.asynccontextmanager
async def budget_store(kind: str) -> AsyncIterator[Any]:
    """A store of ``kind`` (memory, sqlite: a file in a temp folder, postgres: a private server), written to."""
    from polpo.clock import FakeClock
    from tests.support.stores import writing

    clock = FakeClock()
    with contextlib.ExitStack() as stack:
        if kind == "memory":
            from polpo.store.memory import MemoryStore
            store: Any = MemoryStore(clock)
        elif kind == "sqlite":
            from polpo.store.sqlite import SqliteStore
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="polpo-bench-budget-")))
            store = await SqliteStore.open(tmp / "polpo.db", clock=clock)
        else:
            from polpo.config import StoreSettings
            from polpo.store.postgres import PostgresStore
            from tests.support.postgres import running_cluster
            pg = stack.enter_context(running_cluster())
            store = await PostgresStore.open(StoreSettings(url=pg.url(pg.create_database("budget"))), clock=clock)
        async with writing(store):
            yield store


@contextlib.asynccontextmanager
async def metered(kind: str | None) -> AsyncIterator[None]:
    """With a store ``kind``: every call of the block under a real turn meter with budgets, its rows written to
    that store as it goes (each call's estimate held in it before the call)."""
    if kind is None:
        yield
        return
    from polpo.clock import FakeClock
    from polpo.config import Config
    from polpo.engine.spend_book import SpendBook
    from polpo.llm.spend import metering
    from polpo.mission.schema import MissionSpec

    spec = MissionSpec.model_validate({"settings": {"budget": {"usd": 1e5, "tokens": 10**11}}, "tasks": [
        {"title": "t", "description": "d", "budget": {"usd": 1e5, "tokens": 10**11}}]})
    async with budget_store(kind) as store:
        book = SpendBook(Config.model_validate({"budget": {"daily_tokens": 10**11}}), store, FakeClock())
        with metering(book.meter("m:1", "m", "coder", spec.tasks[0], spec)):
            yield
    print(f"metered ({kind}): {book.spend_of('task', 'm:1').calls} calls counted", file=sys.stderr)


async def bench(runs: int, seconds: float, budget: str | None = None) -> dict[str, Any]:
    async with metered(budget):
        return await _bench(runs, seconds)


async def _bench(runs: int, seconds: float) -> dict[str, Any]:
    with FakeLLM(models=MODELS) as srv, tempfile.TemporaryDirectory(prefix="polpo-bench-panel-") as tmp:
        srv.responder = responder(seconds)
        models = [ModelSettings(f"openai/{m}", api_base=srv.base_url, api_key_env=KEY_ENV, timeout=60)
                  for m in MODELS]
        ctx = workspace(Path(tmp))
        client = TimedClient(max_retries=0)
        await time_litellm(client)
        await timed(client, models, ctx, srv)  # warm-up: litellm import, one connection per model
        await timed(client, models[:1], ctx, srv)
        three: list[float] = []
        one: list[float] = []
        in_client: list[float] = []  # of the single reviewer's runs
        in_litellm: list[float] = []
        in_tools: list[float] = []
        single: list[RecordedRequest] = []
        for n in range(runs):  # alternate the order so drift (CPU frequency, GC) hits both alike
            for size in ((3, 1) if n % 2 == 0 else (1, 3)):
                wall, made = await timed(client, models[:size], ctx, srv)
                (three if size == 3 else one).append(wall)
                if size == 1:
                    single = made
                    in_client.append(client.spent)
                    in_litellm.append(client.in_litellm)
                    in_tools.append(TOOLS_TIMER.spent)
        floor = await http_floor(srv, [dict(r) for r in single], seconds)
    return {"three": three, "one": one, "in_client": in_client, "in_litellm": in_litellm, "in_tools": in_tools,
            "floor": floor}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--delay", type=float, default=0.1, help="server delay per reply, seconds (default 0.1)")
    ap.add_argument("--keep-nagle", action="store_true", help="leave Nagle on in FakeLLM (adds ~40 ms per call)")
    ap.add_argument("--budget", nargs="?", const="memory", choices=("memory", "sqlite", "postgres"),
                    help="every call metered under budgets (polpo.engine.spend_book), its spend in this store "
                         "(default memory)")
    args = ap.parse_args()
    if args.runs < 1 or args.delay < 0:
        ap.error("--runs must be ≥ 1 and --delay ≥ 0")
    os.environ[KEY_ENV] = "sk-bench-not-a-real-key"
    if not args.keep_nagle:
        fake_llm._Handler.disable_nagle_algorithm = True
    out = anyio.run(bench, args.runs, args.delay, args.budget)
    d, seq = args.delay, SEQUENTIAL_CALLS
    served = seq * d

    print(f"review panel: {seq} sequential calls per reviewer (read_file, grep, analysis, scores), "
          f"server delay {d * 1000:.0f} ms/reply, {args.runs} runs (+1 warm-up){', Nagle on' if args.keep_nagle else ''}")
    print(f"{'run':>4} {'1 reviewer s':>13} {'3 reviewers s':>14} {'ratio':>6} {'1: ms/call':>11} "
          f"{'3: ms/call':>11} {'3: ms/step':>11}")
    for i, (w1, w3) in enumerate(zip(out["one"], out["three"], strict=True), 1):
        print(f"{i:>4} {w1:>13.3f} {w3:>14.3f} {w3 / w1:>6.3f} {(w1 - served) / seq * 1000:>11.2f} "
              f"{(w3 - served) / (3 * seq) * 1000:>11.2f} {(w3 - served) / seq * 1000:>11.2f}")
    m1, m3 = statistics.median(out["one"]), statistics.median(out["three"])
    ratio = m3 / m1
    over1 = statistics.median((w - served) / seq * 1000 for w in out["one"])
    over3_call = statistics.median((w - served) / (3 * seq) * 1000 for w in out["three"])
    over3_step = statistics.median((w - served) / seq * 1000 for w in out["three"])
    client_ms = statistics.median((c - served) / seq * 1000 for c in out["in_client"])  # LLMClient+litellm+HTTP
    reviewer_ms = statistics.median((w - c - t) / seq * 1000 for w, c, t in zip(
        out["one"], out["in_client"], out["in_tools"], strict=True))  # without the tools' own work
    tools_ms = statistics.median(t / seq * 1000 for t in out["in_tools"])
    wrapper_ms = statistics.median((c - li) / seq * 1000 for c, li in zip(out["in_client"], out["in_litellm"],
                                                                        strict=True))  # LLMClient around litellm
    litellm_ms = statistics.median((li - served) / seq * 1000 for li in out["in_litellm"]) - out["floor"]
    own_ms = reviewer_ms + wrapper_ms
    ok_ratio, ok_over, ok_own = ratio <= RATIO_GOAL, over1 <= OVERHEAD_GOAL_MS, own_ms <= OWN_GOAL_MS
    print(f"median wall: 1 reviewer {m1:.3f} s, 3 reviewers {m3:.3f} s (floor {served:.3f} s of scripted delay)")
    print(f"ratio 3/1 = {ratio:.3f}  goal ≤ {RATIO_GOAL:g}: {'ok' if ok_ratio else 'OVER GOAL'}")
    print(f"overhead per judge call: {over1:.2f} ms (1 reviewer; the old {OVERHEAD_GOAL_MS:g} ms goal "
          f"{'met' if ok_over else 'not met: see litellm and the HTTP floor below'}); panel {over3_call:.2f} ms per call, "
          f"{over3_step:.2f} ms per sequential step")
    print(f"1 reviewer, per call: reviewer/panel code {reviewer_ms:.2f} + LLMClient {wrapper_ms:.2f} + litellm "
          f"{litellm_ms:.2f} + HTTP/FakeLLM floor {out['floor']:.2f} ms (+ the tools' own work "
          f"{tools_ms:.2f} ms: read_file and grep on the workspace)")
    print(f"polpo's own share {own_ms:.2f} ms per call  goal ≤ {OWN_GOAL_MS:g} ms: {'ok' if ok_own else 'OVER GOAL'}"
          f"; litellm's share {litellm_ms:.2f} ms per call")
    print(json.dumps({
        "bench": "review_panel", "runs": args.runs, "server_delay_s": d, "nagle": args.keep_nagle,
        "sequential_calls": seq, "wall_1_s": round(m1, 4), "wall_3_s": round(m3, 4), "ratio": round(ratio, 4),
        "ratio_goal": RATIO_GOAL, "overhead_ms_per_call": round(over1, 3),
        "panel_overhead_ms_per_call": round(over3_call, 3), "panel_overhead_ms_per_step": round(over3_step, 3),
        "reviewer_code_ms_per_call": round(reviewer_ms, 3), "llmclient_ms_per_call": round(wrapper_ms, 3),
        "tools_ms_per_call": round(tools_ms, 3),
        "polpo_own_ms_per_call": round(own_ms, 3), "own_goal_ms": OWN_GOAL_MS,
        "litellm_ms_per_call": round(litellm_ms, 3), "litellm_client_ms_per_call": round(client_ms - out["floor"], 3),
        "http_floor_ms_per_call": round(out["floor"], 3), "overhead_goal_ms": OVERHEAD_GOAL_MS,
        "ok": ok_ratio and ok_own,
    }))


if __name__ == "__main__":
    main()
