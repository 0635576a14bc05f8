"""Helpers to run a real daemon in tests: in-process (with an injectable clock) or as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio

from polpo.agents.registry import AgentFactory
from polpo.clock import Clock
from polpo.config import Config, load_config
from polpo.daemon import Daemon
from polpo.events.catalog import Event

REPO = Path(__file__).resolve().parents[2]

DEFAULT_AGENTS = """
[agents.shell]
type = "command"
command = ["bash", "-c", "{description}"]
timeout = 30
"""


KEEP_FILES = '\n[retention]\nfinished_files = "keep"\n'
"""Finished missions' files stay in the folder (tests look at them); a test that gives its own ``[retention]``
table gets the default (they move to done/) unless it says otherwise."""


def write_config(root: Path, *, agents: str = DEFAULT_AGENTS, extra: str = "", max_concurrency: int = 4,
                 grace: float = 2) -> Path:
    """A config in ``root/config/polpo.toml`` with missions and state folders under ``root`` (:data:`KEEP_FILES`
    unless ``extra`` has a ``[retention]`` table)."""
    (root / "config").mkdir(parents=True, exist_ok=True)
    (root / "missions").mkdir(exist_ok=True)
    path = root / "config" / "polpo.toml"
    path.write_text(f"""
[daemon]
missions_dir = "../missions"
state_dir = "../state"
max_concurrency = {max_concurrency}
shutdown_grace = {grace}

[defaults]
max_retries = 1
max_fix_attempts = 1
agent_timeout = 30
check_timeout = 30
{agents}
{extra}
{"" if "[retention]" in extra else KEEP_FILES}""")
    return path


def mission_files(folder: Path) -> list[Path]:
    """What is in a missions folder but the daemons' lock file (polpo.missions_lock) and other dot-files."""
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))
def llm_agent(base_url: str, *keys: str, name: str = "coder", key_env: str = "POLPO_TEST_FAKE_LLM_KEY") -> str:
    """An ``[agents.NAME]`` LLM agent whose provider is the tests' FakeLLM at ``base_url``, with more ``keys``
    (``"ask_human = true"``…) and ``[llm] max_retries = 0``; its time limit leaves room for a loaded machine's
    first start of an MCP server."""
    lines = "\n".join(keys)
    return f"""
[agents.{name}]
type = "llm"
model = "openai/fake-model"
api_base = "{base_url}"
api_key_env = "{key_env}"
max_turns = 10
timeout = 120
{lines}

[llm]
max_retries = 0
"""


def mission_json(*tasks: dict[str, Any], **top: Any) -> str:
    return json.dumps({"name": top.pop("name", "test mission"), **top, "tasks": list(tasks)})


def shell_task(title: str, script: str, **fields: Any) -> dict[str, Any]:
    return {"title": title, "description": script, "assignTo": "shell", **fields}


class EventWaiter:
    """Collects every published event; lets a test wait for one matching a predicate."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._changed = anyio.Event()

    def __call__(self, ev: Event) -> None:
        self.events.append(ev)
        self._changed.set()

    def backfill(self, earlier: list[Event]) -> None:
        """Events stored before this waiter was subscribed: a daemon that finds work at its start (a file already
        in the folder) may publish some before the test's subscription (each is kept once, in order)."""
        have = {e.seq for e in self.events}
        missed = [e for e in earlier if e.seq not in have]
        if missed:
            self.events = sorted([*missed, *self.events], key=lambda e: e.seq)
            self._changed.set()

    def names(self, task_id: str | None = None) -> list[str]:
        return [e.event for e in self.events if task_id is None or e.task_id == task_id]

    def of(self, name: str, **match: Any) -> list[Event]:
        return [e for e in self.events if e.event == name and all(
            getattr(e, k, e.data.get(k)) == v for k, v in match.items())]

    async def wait_for(self, pred: Callable[[Event], bool], timeout: float = 20.0) -> Event:
        """The first event ``pred`` accepts; a TimeoutError after ``timeout`` seconds that lists the last events
        seen (what the daemon did instead is what a failure needs)."""
        with anyio.move_on_after(timeout):
            seen = 0
            while True:
                for ev in self.events[seen:]:
                    if pred(ev):
                        return ev
                seen = len(self.events)
                self._changed = anyio.Event()
                await self._changed.wait()
        last = "\n".join(f"  {e.seq} {e.event} {e.mission_id or ''} {e.task_id or ''} {e.data}"[:300]
                         for e in self.events[-15:])
        raise TimeoutError(f"no such event within {timeout:g} s; {len(self.events)} seen, the last:\n{last}")

    async def wait_event(self, name: str, timeout: float = 20.0, **match: Any) -> Event:
        return await self.wait_for(lambda e: e.event == name and all(
            getattr(e, k, e.data.get(k)) == v for k, v in match.items()), timeout)


@asynccontextmanager
async def running_daemon(cfg: Config, *, clock: Clock | None = None,
                         agents: AgentFactory | None = None) -> AsyncIterator[tuple[Daemon, EventWaiter]]:
    """Start a daemon in this event loop; stop it (SIGTERM-equivalent) on exit."""
    daemon = Daemon(cfg, clock=clock, console=None, handle_signals=False, agents=agents)
    waiter = EventWaiter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run)
        with anyio.fail_after(20):
            while daemon.store is None:
                await anyio.sleep(0.01)
        daemon.store.subscribe(waiter)
        waiter.backfill(await daemon.store.events_after(daemon.store.opened_seq))
        with anyio.fail_after(20):
            await daemon.started.wait()
        try:
            yield daemon, waiter
        finally:
            daemon.request_stop()


def submit(cfg: Config, name: str, text: str) -> Path:
    """Write a mission file atomically, as `polpo submit` does."""
    target = cfg.missions_dir / name
    tmp = cfg.missions_dir / f".{name}.tmp"
    tmp.write_text(text)
    os.replace(tmp, target)
    return target


# -- subprocess daemons (crash tests, CLI tests) ------------------------------------------------------------

def polpo_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "polpo", *args]


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 60, env: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(polpo_cmd(*args), cwd=cwd or REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


@contextmanager
def daemon_process(config: Path, *, env: dict[str, str] | None = None, args: tuple[str, ...] = (),
                   ) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(polpo_cmd("daemon", "--config", str(config), *args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})},
                            start_new_session=False)
    try:
        yield proc
    finally:
        terminate(proc)


def terminate(proc: subprocess.Popen[Any], timeout: float = 15) -> None:
    """SIGTERM, then SIGKILL if it is still there after ``timeout`` seconds; waited for either way."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def read_events(state: Path) -> list[dict[str, Any]]:
    path = state / "events.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def wait_events(state: Path, pred: Callable[[list[dict[str, Any]]], bool], timeout: float = 30) -> list[dict[str, Any]]:
    """Poll the event log until ``pred(events)`` holds (a test harness wait, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while True:
        evs = read_events(state)
        if pred(evs):
            return evs
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting; last events: {[e['event'] for e in evs[-15:]]}")
        time.sleep(0.05)


def post_mission(url: str, name: str, text: str) -> None:
    """Submit a mission through ``POST /api/missions`` (accepted: 201)."""
    import httpx  # (the web tests' client; the other helpers need none)

    r = httpx.post(f"{url}/api/missions?name={name}", timeout=30, headers={"Content-Type": "application/json"},
                   content=text)
    assert r.status_code == 201, r.text


def load(config: Path) -> Config:
    return load_config(config)
