"""The fault classes, as small pieces: one verb on one target, each undone by its pair.

=========================  =====================================================================================
``kill`` / ``stop`` / ``cont``  a node's ``daemon``, ``guard`` (one of its two), one ``agent`` (the first running one of
                           the node, by task id) or the whole ``node`` (daemon, guards and agents): SIGKILL,
                           SIGSTOP, SIGCONT. ``kill … node`` also holds the node down until ``up``.
``up``                     lets the node's service manager start it again (after ``kill … node``)
``cut`` / ``mend``         the node's way to PostgreSQL: a half-open blackhole (sockets held open, nothing
                           passes) / healed; ``slow 200ms`` adds latency until ``mend``; ``reset`` RSTs every
                           connection once
``pg-down`` / ``pg-up``    PostgreSQL: ``fast`` or ``immediate`` stop, or ``kill`` (SIGKILL of the
                           postmaster) / started again
``fill`` / ``free``        the node's state folder (a tmpfs of its own) made full / given back
``ro`` / ``rw``            the node's state folder made read-only / writable again
``llm`` / ``llm-ok``       the node's model provider: ``slow``, ``429``, ``500`` until ``llm-ok``; ``kill``: its
                           next reply is followed by ``kill -9`` of the daemon (tests/nemesis/provider.py)
=========================  =====================================================================================

Every verb returns a line for the timeline saying what it found and did ("kill -9 guard of b (pid 4242)",
"no agent running on a: nothing to kill"), so a rerun's timeline can be compared with the first one's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

from tests.nemesis.ledger import parse, runs
from tests.nemesis.plan import BUSIEST, Step
from tests.nemesis.world import World
from tests.support.procs import guards_of, is_dead

__all__ = ["Faults"]

GUARD_WAIT = 5.0  # seconds a guard fault waits for a starting daemon's guard
PG_UP_WITHIN = 60.0  # seconds to start PostgreSQL again (after kill -9 its backends hold the memory a moment)


class Faults:
    def __init__(self, world: World) -> None:
        self.w = world
        self.stopped: dict[tuple[str, str], list[int]] = {}  # (node, what) -> pids stopped, for their cont
        self.resolved: dict[str, str] = {}  # busiest#N -> the node it was when its fault began

    def act(self, step: Step) -> str:
        fn = getattr(self, "_" + step.verb.replace("-", "_"))
        target = step.target
        note = ""
        if target.startswith(BUSIEST):
            if target not in self.resolved:
                self.resolved[target] = self._busiest()
                note = f" (the node running the most agents: {self.resolved[target]})"
            target = self.resolved[target]
        return str(fn(target, step.arg)) + note

    def _busiest(self) -> str:
        running: dict[str, int] = {n: 0 for n in self.w.plan.nodes}
        for r in runs(parse(self.w.ledger)):
            if r.end is None and r.node in running and alive(r.pid):
                running[r.node] += 1
        return min(running, key=lambda n: (-running[n], n))

    # -- processes --------------------------------------------------------------------------------------------
    def _pids(self, node: str, what: str) -> list[int]:
        life = self.w.sups[node].life
        daemon = None if life is None else life.pid
        if what == "daemon":
            return [] if daemon is None else [daemon]
        if what == "guard":  # a daemon still starting has none yet: wait a little for it (bounded)
            deadline = time.monotonic() + GUARD_WAIT
            while daemon is not None and not guards_of(daemon) and time.monotonic() < deadline:
                time.sleep(0.05)
            return [] if daemon is None else guards_of(daemon)[:1]  # one of its pair: one process dies (the OOM
            # killer, a stray kill -9); both at once is the documented limit (docs/how-to/cluster.md)
        agents = self._agents(node)
        if what == "agent":
            return agents[:1]
        return ([] if daemon is None else [daemon, *guards_of(daemon)]) + agents  # the node

    def _agents(self, node: str) -> list[int]:
        """The running agents of ``node`` (process group leaders, by the ledger), first task first."""
        open_runs = [r for r in runs(parse(self.w.ledger)) if r.node == node and r.end is None]
        return [r.pid for r in sorted(open_runs, key=lambda r: (r.task, r.attempt)) if alive(r.pid)]

    def _kill(self, node: str, what: str) -> str:
        sup = self.w.sups[node]
        if what == "node":
            sup.hold()  # a crashed machine: back at "up"
        life = sup.life
        pids = self._pids(node, what)
        if not pids:
            return f"no {what} running on {node}: nothing to kill"
        for pid in pids:
            if life is not None and pid == life.pid:
                sup.signal(signal.SIGKILL, why=f"kill -9 {what}")  # recorded in its life: not a crash of its own
            else:
                _group(pid, signal.SIGKILL)
        return f"kill -9 {what} of {node} (pid {', '.join(map(str, pids))})"

    def _stop(self, node: str, what: str) -> str:
        pids = self._pids(node, what)
        if not pids:
            return f"no {what} running on {node}: nothing to stop"
        for pid in pids:
            _group(pid, signal.SIGSTOP)
        self.stopped[(node, what)] = pids
        return f"SIGSTOP {what} of {node} (pid {', '.join(map(str, pids))})"

    def _cont(self, node: str, what: str) -> str:
        pids = self.stopped.pop((node, what), [])
        if not pids:
            return f"nothing was stopped: no SIGCONT for the {what} of {node}"
        for pid in pids:
            _group(pid, signal.SIGCONT)
        return f"SIGCONT {what} of {node} (pid {', '.join(map(str, pids))})"

    def _up(self, node: str, _arg: str) -> str:
        self.w.sups[node].up()
        return f"{node} may start again (its service manager restarts it)"

    # -- network ----------------------------------------------------------------------------------------------
    def _cut(self, node: str, _arg: str) -> str:
        self.w.proxies[node].blackhole()
        return f"blackhole between {node} and PostgreSQL (sockets held open)"

    def _mend(self, node: str, _arg: str) -> str:
        self.w.proxies[node].heal()
        return f"network between {node} and PostgreSQL healed"

    def _slow(self, node: str, arg: str) -> str:
        self.w.proxies[node].latency(float(arg.removesuffix("ms")) / 1000)
        return f"{arg} of latency between {node} and PostgreSQL"

    def _reset(self, node: str, _arg: str) -> str:
        n = self.w.proxies[node].reset()
        return f"RST of {n} connection(s) between {node} and PostgreSQL"

    # -- PostgreSQL -------------------------------------------------------------------------------------------
    def _pg_down(self, _target: str, mode: str) -> str:
        pg = self.w.pg
        assert pg is not None
        if mode == "kill":
            pid = int((pg.datadir / "postmaster.pid").read_text().split()[0])
            os.kill(pid, signal.SIGKILL)
            return f"kill -9 of the PostgreSQL postmaster (pid {pid})"
        pg.stop_server(mode)
        return f"PostgreSQL stopped ({mode})"

    def _pg_up(self, _target: str, _arg: str) -> str:
        pg = self.w.pg
        assert pg is not None
        deadline = time.monotonic() + PG_UP_WITHIN
        while True:
            try:
                pg.start_server()
                return "PostgreSQL started again"
            except RuntimeError as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"PostgreSQL would not start again: {e}") from None
                time.sleep(0.5)

    # -- the model provider -----------------------------------------------------------------------------------
    def _llm(self, node: str, mode: str) -> str:
        self.w.providers[node].mode = mode
        return {"slow": f"{node}'s provider answers after 3 s", "kill": f"{node}'s provider kills its daemon right "
                "after its next reply"}.get(mode, f"{node}'s provider answers {mode}")

    def _llm_ok(self, node: str, _arg: str) -> str:
        self.w.providers[node].mode = ""
        return f"{node}'s provider answers again"

    # -- disk -------------------------------------------------------------------------------------------------
    def _fill(self, node: str, _arg: str) -> str:
        if self.w.can_mount is not None:
            return f"skipped: the state folder cannot be a tmpfs here ({self.w.can_mount})"
        self.w.fillers[node] = self.w.mounts.fill(self.w.state(node))
        return f"{node}'s state folder is full"

    def _free(self, node: str, _arg: str) -> str:
        filler = self.w.fillers.pop(node, None)
        if filler is None:
            return f"nothing to free on {node}"
        self.w.mounts.free(filler)
        return f"{node}'s state folder has room again"

    def _ro(self, node: str, _arg: str) -> str:
        if self.w.can_mount is not None:
            return f"skipped: cannot mount here ({self.w.can_mount})"
        self.w.mounts.read_only(self.w.state(node))
        return f"{node}'s state folder is read-only"

    def _rw(self, node: str, _arg: str) -> str:
        if self.w.can_mount is not None:
            return "skipped"
        self.w.mounts.writable(self.w.state(node))
        return f"{node}'s state folder is writable again"


def _group(pid: int, sig: int) -> None:
    """Signal ``pid``'s process group: daemon, guard and agent each lead their own (an agent's children too)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def alive(pid: int) -> bool:
    return not is_dead(pid)
