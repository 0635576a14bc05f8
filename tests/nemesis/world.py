"""The processes of one seed's run: folders, a database, one TCP proxy per node, each node's daemon under its
:class:`~.supervisor.Supervisor` — and the store read back at the end.

One node runs on SQLite; two or three share a private PostgreSQL database (a fresh one per seed, on the server
the caller gives: the nemesis stops and kills that server, so it must be its own). Each PostgreSQL node reaches
the server through its own :class:`~tests.support.tcp_proxy.TcpProxy`, so a cut is between one node and the
database. When the machine lets us mount (root), each node's state folder is a small tmpfs of its own, which the
disk faults fill up or make read-only.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

from tests.nemesis.ledger import AGENT, done_file
from tests.nemesis.plan import APPROVE_AFTER, LLM_BUDGET, SCHEDULE_FOR, MissionSpec, Plan
from tests.nemesis.provider import Provider
from tests.nemesis.supervisor import Supervisor, daemon_argv
from tests.support.mounts import Mounts, mount_refusal
from tests.support.postgres import PgCluster
from tests.support.tcp_proxy import TcpProxy

__all__ = ["World"]

STATE_TMPFS_KB = 64 * 1024


class World:
    def __init__(self, plan: Plan, root: Path, pg: PgCluster | None, log: Callable[[str], None],
                 python: str | None = None) -> None:
        self.plan = plan
        self.python = python  # whose polpo the daemons run (None: this checkout's)
        self.root = root
        self.pg = pg
        self.log = log
        self.db: str | None = None
        self.proxies: dict[str, TcpProxy] = {}
        self.sups: dict[str, Supervisor] = {}
        self.mounts = Mounts()
        self.can_mount: str | None = None  # why not, or None
        self.fillers: dict[str, Path] = {}
        self.providers: dict[str, Provider] = {}

    # -- set-up -----------------------------------------------------------------------------------------------
    @property
    def ledger(self) -> Path:
        return self.root / "ledger.log"

    @property
    def bill(self) -> Path:
        """What the providers served (tests/nemesis/provider.py)."""
        return self.root / "served.log"

    @property
    def missions(self) -> Path:
        return self.root / "missions"

    def state(self, node: str) -> Path:
        return self.root / node / "state"

    def setup(self) -> None:
        self.missions.mkdir(parents=True)
        (self.root / "shared").mkdir()
        agent = self.root / "agent.sh"
        agent.write_text(AGENT)
        self.ledger.touch()
        self.can_mount = mount_refusal(self.root / ".probe")
        if self.plan.postgres:
            assert self.pg is not None, "a PostgreSQL topology needs a server"
            self.db = self.pg.create_database(f"nemesis{self.plan.seed}")
        for node in self.plan.nodes:
            self.state(node).mkdir(parents=True)
            if self.can_mount is None:
                self.mounts.tmpfs(self.state(node), size_kb=STATE_TMPFS_KB, inodes=4096)
            url = None
            if self.pg is not None and self.db is not None:
                proxy = self.proxies[node] = TcpProxy(self.pg.port).start()
                url = f"postgresql://postgres@127.0.0.1:{proxy.port}/{self.db}"
            if self.plan.llm:
                self.providers[node] = Provider(node, self.bill, functools.partial(self._kill_daemon, node)).start()
            config = self._config(node, url, agent)
            self.sups[node] = Supervisor(node, daemon_argv(config, self.python), self.root / node / "daemon.out",
                                         env={**os.environ, "NEMESIS_LLM_KEY": "sk-nemesis-not-a-secret"},
                                         restart=self.plan.restart)

    def _kill_daemon(self, node: str) -> None:
        self.sups[node].signal(signal.SIGKILL, why="kill -9 right after the provider's reply")

    def _config(self, node: str, url: str | None, agent: Path) -> Path:
        store = f'[store]\nurl = "{url}"\nlease = {self.plan.lease}\n' if url else ""
        path = self.root / node / "polpo.toml"
        path.write_text(f"""
[daemon]
missions_dir = "{self.missions}"
state_dir = "{self.state(node)}"
max_concurrency = 3
shutdown_grace = 2
node = "{node}"

{store}
[security]
workspace_roots = ["{self.root / 'shared'}"]

[defaults]
max_retries = 3
max_fix_attempts = 2
agent_timeout = 120
check_timeout = 30

[agents.work]
type = "command"
command = ["bash", "{agent}", "{{description}}"]
timeout = 120
env = {{ NEMESIS_NODE = "{node}", NEMESIS_LEDGER = "{self.ledger}" }}
""")
        if node in self.providers:
            path.write_text(path.read_text() + f"""
[agents.think]
type = "llm"
model = "openai/fake-model"
api_base = "{self.providers[node].base_url}"
api_key_env = "NEMESIS_LLM_KEY"
max_turns = 6
""")
        return path

    def start(self, wait: Callable[[Callable[[], bool], float, str], None]) -> None:
        """Start the nodes in order; on PostgreSQL the first one leads before the others start (so a plan's
        ``a`` is the leader when the faults begin)."""
        first, *others = self.plan.nodes
        self.sups[first].start()
        self.log(f"start {first}")
        wait(lambda: self._started(first), 60, f"node {first} started")
        if self.plan.postgres:
            wait(lambda: any(e["event"] == "cluster:leader" for e in self.events(first)), 60, f"{first} leads")
        for node in others:  # together
            self.sups[node].start()
            self.log(f"start {node}")
        for node in others:
            wait(lambda node=node: self._started(node), 60, f"node {node} started")  # type: ignore[misc]

    def _started(self, node: str) -> bool:
        return any(e["event"] == "orchestrator:started" and e.get("node", node) == node for e in self.events(node))

    def submit(self, m: MissionSpec) -> None:
        doc: dict[str, Any] = {"name": m.name, "workspace": str(self.root / "shared" / m.name), "tasks": []}
        for i, t in enumerate(m.tasks):
            done = done_file(f"{m.name}:{i + 1}")
            task: dict[str, Any] = {
                "title": t.title, "assignTo": "work", "description": f"{t.seconds} {'flaky' if t.flaky else 'ok'}",
                "dependsOn": list(t.after), "expectations": [{"type": "file_exists", "path": done}]}
            if t.llm:  # the provider reads the mark, writes the file through the agent's tool and bills each call
                task |= {"assignTo": "think", "description": f"NEMESIS-LLM {m.name}:{i + 1} {done}",
                         "budget": {"tokens": LLM_BUDGET}}
            if m.approval == t.title:  # a person's approval, given by its timeout (the leader's timer)
                task |= {"approval": "before", "approvalTimeout": f"PT{APPROVE_AFTER:g}S",
                         "approvalTimeoutAction": "approve"}
            doc["tasks"].append(task)
        if m.delay is not None:
            doc["delays"] = [{"name": "pause", "afterTasks": [m.delay[0]], "blocksTasks": [m.delay[1]],
                              "duration": f"PT{m.delay[2]:g}S"}]
        if m.checkpoint is not None:
            doc["checkpoints"] = [{"name": "look", "afterTasks": [m.checkpoint[0]], "blocksTasks": [m.checkpoint[1]],
                                   "message": "the nemesis, as a person, resumes it"}]
        if m.every is not None:
            end = datetime.now(UTC) + timedelta(seconds=SCHEDULE_FOR)
            doc |= {"schedule": f"PT{m.every:g}S", "endDate": end.isoformat(timespec="seconds")}
        if self.plan.postgres:
            doc["settings"] = {"affinity": "any"}  # every node runs the mission's tasks
        tmp = self.missions / f".{m.name}.tmp"
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, self.missions / f"{m.name}.json")

    def resume(self, mission: str) -> str | None:
        """As a person: ``polpo resume MISSION`` through the first node's config; the CLI's error, or None."""
        config = self.root / self.plan.nodes[0] / "polpo.toml"
        done = subprocess.run([self.python or sys.executable, "-m", "polpo", "resume", mission, "--config",
                               str(config)], capture_output=True, text=True, timeout=60, check=False, cwd=self.root)
        return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["?"])[-1]

    # -- evidence ---------------------------------------------------------------------------------------------
    def events(self, node: str) -> list[dict[str, Any]]:
        path = self.state(node) / "events.jsonl"
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return []
        out = []
        for line in text.splitlines():
            if line.endswith("}"):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    out.append({"event": "<unreadable line>", "seq": None, "raw": line[:200]})
        return out

    def store_rows(self) -> dict[str, list[dict[str, Any]]]:
        """The store's events, attempts, tasks and missions (after the daemons have stopped)."""
        queries = {
            "events": "SELECT seq, ts, event, mission_id, task_id, data FROM events ORDER BY seq",
            "attempts": "SELECT task_id, number, kind, status, exit_code, verdict, started_at, finished_at "
                        "FROM attempts ORDER BY task_id, number",
            "tasks": "SELECT id, mission_id, status FROM tasks ORDER BY id",
            "missions": "SELECT id, status FROM missions ORDER BY seq",
            "spend": "SELECT key, tokens_in + tokens_out AS tokens, calls FROM spend WHERE scope = 'task'"}
        if not self.plan.postgres:
            con = sqlite3.connect(f"file:{self.state(self.plan.nodes[0]) / 'polpo.db'}?mode=ro", uri=True)
            con.row_factory = sqlite3.Row
            try:
                return {k: [dict(r) for r in con.execute(q)] for k, q in queries.items()}
            finally:
                con.close()
        assert self.pg is not None and self.db is not None
        return anyio.run(_pg_rows, self.pg.url(self.db), queries)

    # -- tear-down --------------------------------------------------------------------------------------------
    def stop(self) -> list[str]:
        """Stop every node (SIGTERM, bounded); the problems met."""
        return [p for sup in self.sups.values() if (p := sup.stop()) is not None]

    def close(self, keep: bool) -> None:
        for proxy in self.proxies.values():
            proxy.close()
        for provider in self.providers.values():
            provider.close()
        saved = {}
        if keep and self.can_mount is None:  # a tmpfs's files go with it: copied out first
            for node in self.plan.nodes:
                saved[node] = self.root / node / "state.saved"
                shutil.copytree(self.state(node), saved[node], ignore=shutil.ignore_patterns(".filler"))
        self.mounts.release_all()
        for node, copy in saved.items():
            shutil.rmtree(self.state(node), ignore_errors=True)
            copy.rename(self.state(node))
        if self.pg is not None and self.db is not None:
            try:
                self.pg.drop_database(self.db)
            except RuntimeError as e:
                self.log(f"could not drop the database {self.db}: {e}")
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)


async def _pg_rows(url: str, queries: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return {k: [dict(r) for r in await conn.fetch(q)] for k, q in queries.items()}
    finally:
        await conn.close()
