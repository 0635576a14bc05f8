"""Drive the real engine on the in-memory store, without a daemon, a watcher or a file of state.

    async with engine_on_memory(cfg, agents={"fake": ScriptAgent(...)}, store=store) as run:
        m = await run.accept(mission_json(...))
        await run.wait_event("mission:completed", mission_id=m.id)

``ScriptAgent`` is an agent of the test (the ``Agent`` protocol, implemented here): each attempt calls a
function of the request that may write files and returns exit code, output and so on. A "crash" is leaving the
context without ``stop``: the memory store keeps what was committed, as SQLite would after ``kill -9``, and a
new ``engine_on_memory`` on the same store recovers from it.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson

from polpo.agents.base import AgentRequest, AgentResult
from polpo.agents.registry import AgentFactory
from polpo.clock import FakeClock
from polpo.config import Config, parse_config
from polpo.engine.engine import Engine
from polpo.events.catalog import Event
from polpo.mission.loader import load_mission
from polpo.model.records import Mission
from polpo.store.memory import MemoryStore

Behaviour = Callable[[AgentRequest], Awaitable[AgentResult | int] | AgentResult | int]


def result(exit_code: int | None = 0, *, stdout: str = "", stderr: str = "", error: str | None = None,
           timed_out: bool = False) -> AgentResult:
    return AgentResult(exit_code=exit_code, signal=None, timed_out=timed_out, stdout_tail=stdout,
                       stderr_tail=stderr, stdout_bytes=len(stdout), stderr_bytes=len(stderr), duration=0.01,
                       error=error)


@dataclass
class ScriptAgent:
    """An agent whose every attempt runs ``behaviour(request)`` (an int is an exit code)."""

    behaviour: Behaviour = lambda _r: 0
    name: str = "fake"
    requests: list[AgentRequest] = field(default_factory=list)

    async def run(self, request: AgentRequest, *, on_start: Callable[[int | None], None]) -> AgentResult:
        self.requests.append(request)
        on_start(None)
        out = self.behaviour(request)
        if not isinstance(out, AgentResult | int):
            out = await out
        return result(out) if isinstance(out, int) else out


def config(root: Path, extra: str = "", *, retries: int = 1, fixes: int = 1) -> Config:
    (root / "missions").mkdir(parents=True, exist_ok=True)
    path = root / "polpo.toml"
    path.write_text(f"""
[daemon]
missions_dir = "missions"
state_dir = "state"
max_concurrency = 4
[defaults]
max_retries = {retries}
max_fix_attempts = {fixes}
check_timeout = 30
{extra}
""")
    import tomllib

    return parse_config(tomllib.loads(path.read_text()), path)


class SeenEvents:
    """What a harness saw committed, in order, and a bounded wait for an event (shared by the one-engine and the
    in-memory cluster harnesses; each declares ``events`` and ``_changed``)."""

    events: list[Event]
    _changed: anyio.Event

    def publish(self, ev: Event) -> None:
        self.events.append(ev)
        self._changed.set()

    def of(self, name: str, **match: Any) -> list[Event]:
        return [e for e in self.events if e.event == name and all(
            getattr(e, k, e.data.get(k)) == v for k, v in match.items())]

    async def wait_event(self, name: str, timeout: float = 10.0, **match: Any) -> Event:
        with anyio.fail_after(timeout):
            while True:
                found = self.of(name, **match)
                if found:
                    return found[0]
                self._changed = anyio.Event()
                await self._changed.wait()


@dataclass
class EngineRun(SeenEvents):
    engine: Engine
    store: MemoryStore
    clock: FakeClock
    events: list[Event]
    _changed: anyio.Event = field(default_factory=anyio.Event)

    async def accept(self, doc: str | dict[str, Any], source: str = "/missions/m.json") -> Mission:
        raw = doc.encode() if isinstance(doc, str) else orjson.dumps(doc)
        loaded = load_mission(raw, known_agents=self.engine.agents.known_names())
        assert loaded.spec is not None, loaded.problems
        return await self.engine.admission.accept(spec=loaded.spec, source=source,
                                                  digest=hashlib.sha256(raw).hexdigest(), warnings=[])



@asynccontextmanager
async def engine_on_memory(cfg: Config, *, agents: dict[str, Any] | None = None, store: MemoryStore | None = None,
                           clock: FakeClock | None = None, stop: bool = True) -> AsyncIterator[EngineRun]:
    """The engine on a memory store; ``stop=False`` leaves as a crash would (nothing more is written)."""
    clock = clock or FakeClock()
    store = store or MemoryStore(clock)
    engine = Engine(cfg, store, clock, AgentFactory(cfg, clock, extra=agents or {}))
    run = EngineRun(engine, store, clock, [])
    store.subscribe(run.publish)
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.run_writer)
        await engine.load()
        await engine.recover()
        tg.start_soon(engine.run, tg)
        try:
            yield run
        finally:
            if stop:
                await engine.stop(1.0)
                await store.flush()
            tg.cancel_scope.cancel()
