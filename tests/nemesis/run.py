"""One seed, from its plan to its verdict: set the world up, start the nodes, play the schedule (missions dropped
in, faults injected and healed at their times), wait until every mission has ended and every node is up, stop
the nodes, read the store back and check every invariant on the whole history.

Everything it does goes to the timeline, one line each, in seconds after the schedule began::

    +  3.21  kill -9 guard of b (pid 4242)
    +  3.92  kill -9 daemon of b (pid 4231)
    +  4.43  b: exited (killed by the nemesis: kill -9 daemon); restarted as pid 4301

The folder of a run that broke an invariant is kept (ledger, configs, every node's state and output) and its
path printed; ``scripts/nemesis.py --seed S`` reruns the same schedule.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.nemesis.faults import Faults, alive
from tests.nemesis.invariants import History, check
from tests.nemesis.ledger import parse, runs
from tests.nemesis.person import Person
from tests.nemesis.plan import SCHEDULE_FOR, MissionSpec, Plan, Step, make_plan
from tests.nemesis.provider import served
from tests.nemesis.world import World
from tests.support.postgres import PgCluster

__all__ = ["Result", "run_plan", "run_seed"]

QUIET_WITHIN = 120.0  # seconds after the last heal to wait for every mission to end (invariants judge the bound)
UP_WITHIN = 60.0  # seconds for every node to be up again after that
SETTLE_LEASES = 3.0  # leases after the last heal before the run ends: a daemon resumed at the heal may find its
# lease gone, stop with its reason and be started again (as a service manager does), all before the final stop


@dataclass
class Result:
    plan: Plan
    violations: dict[str, list[str]]
    timeline: list[str] = field(default_factory=list)
    root: Path | None = None  # kept when something broke
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def verdict(self) -> list[str]:
        lines: list[str] = []
        if self.ok:
            lines.append(f"verdict: seed {self.plan.seed} held every invariant ({', '.join(self.violations)}) "
                         f"in {self.seconds:.0f} s")
        else:
            lines.append(f"verdict: seed {self.plan.seed} BROKE {sum(map(len, self.violations.values()))} "
                         f"invariant check(s):")
            lines += [f"  {name}: {v}" for name, vs in self.violations.items() for v in vs]
            lines.append(f"kept: {self.root}; rerun: {self.plan.rerun()}")
        return lines


class _Clock:
    def __init__(self, out: Callable[[str], None]) -> None:
        self.t0 = time.time()
        self.lines: list[str] = []
        self.out = out

    def log(self, text: str) -> None:
        line = f"  +{time.time() - self.t0:6.2f}  {text}"
        self.lines.append(line)
        self.out(line)


def run_seed(seed: int, pg: PgCluster | None, *, topology: str | None = None, kinds: tuple[str, ...] | None = None,
             out: Callable[[str], None] = print, keep: bool = False, python: str | None = None) -> Result:
    return run_plan(make_plan(seed, topology=topology, kinds=kinds), pg, out=out, keep=keep, python=python)


def run_plan(plan: Plan, pg: PgCluster | None, *, out: Callable[[str], None] = print, keep: bool = False,
             python: str | None = None) -> Result:
    """Run ``plan`` (see the module docstring); ``python``: whose polpo the daemons run (default this one's)."""
    started = time.monotonic()
    out(plan.describe())
    root = Path(tempfile.mkdtemp(prefix=f"nemesis-{plan.seed}-"))
    clock = _Clock(out)
    world = World(plan, root, pg, clock.log, python)
    faults = Faults(world)
    person = Person(world, clock.log)
    result = Result(plan, {}, clock.lines)
    try:
        out("set-up:")
        world.setup()
        world.start(_wait)
        clock.t0 = time.time()
        out("timeline:")
        lives = _Lives(world, clock)
        person.start()
        freezes, cuts, paused = _play(plan, world, faults, clock, lives)
        healed = time.time()
        lives.look()
        clock.log("every fault is healed; waiting for the missions to end")
        quiet_seq = _wait_quiet(plan, world, clock, lives)
        settle = healed + SETTLE_LEASES * plan.lease
        _wait(lambda: time.time() >= settle and all(_up(world, n) for n in plan.nodes),
              UP_WITHIN + SETTLE_LEASES * plan.lease, "every node up", lives.look)
        lives.look()
        person.stop()
        clock.log("stopping the nodes")
        problems = world.stop()
        history = History(plan=plan, t0=clock.t0, healed=healed, runs=runs(parse(world.ledger)),
                          logs={n: world.events(n) for n in plan.nodes}, store=world.store_rows(),
                          lives={n: s.lives for n, s in world.sups.items()}, freezes=freezes, cuts=cuts, paused=paused,
                          quiet_seq=quiet_seq, stop_problems=problems, orphans=_orphans(world),
                          served=served(world.bill))
        result.violations = check(history)
    except BaseException as e:  # the run itself could not go on (a node never came up): its folder tells why
        keep = True
        out(f"the run stopped: {type(e).__name__}: {e}; kept: {root}; rerun: {plan.rerun()}")
        raise
    finally:
        person.stop()
        _heal_all(world, faults)
        keep = keep or not result.ok
        world.stop()
        world.close(keep)
        result.root = root if keep else None
        result.seconds = time.monotonic() - started
    for line in result.verdict():
        out(line)
    return result


Spans = dict[str, list[tuple[float, float]]]


def _play(plan: Plan, world: World, faults: Faults, clock: _Clock,
          lives: _Lives) -> tuple[Spans, Spans, Spans]:
    """Every mission and fault step at its time; the whole-node freezes, the network cuts and every span a node's
    daemon was stopped (with its node or alone), per node (wall-clock spans, for the invariants)."""
    actions: list[tuple[float, MissionSpec | Step]] = [(m.at, m) for m in plan.missions]
    actions += [(s.at, s) for s in plan.steps()]
    actions.sort(key=lambda a: a[0])
    freezes: dict[str, list[tuple[float, float]]] = {}
    cuts: dict[str, list[tuple[float, float]]] = {}
    paused: dict[str, list[tuple[float, float]]] = {}
    began: dict[tuple[str, str], float] = {}
    for at, what in actions:
        while (delay := clock.t0 + at - time.time()) > 0:
            lives.look()
            time.sleep(min(delay, 0.1))
        lives.look()
        if isinstance(what, MissionSpec):
            world.submit(what)
            clock.log(f"mission {what.name} dropped in ({len(what.tasks)} tasks)")
            continue
        clock.log(faults.act(what))
        key = (what.target, "node" if what.arg == "node" else "net")
        if (what.verb, what.arg) == ("stop", "node") or what.verb in ("cut", "pg-down"):
            began[key] = time.time()
        elif ((what.verb, what.arg) == ("cont", "node") or what.verb in ("mend", "pg-up")) and key in began:
            (freezes if key[1] == "node" else cuts).setdefault(what.target, []).append((began.pop(key), time.time()))
        if what.arg in ("node", "daemon"):
            node = faults.resolved.get(what.target, what.target)
            if what.verb == "stop":
                began[(node, "paused")] = time.time()
            elif what.verb == "cont" and (node, "paused") in began:
                paused.setdefault(node, []).append((began.pop((node, "paused")), time.time()))
    return freezes, cuts, paused


class _Lives:
    """Tells the timeline of every daemon that started or ended since the last look."""

    def __init__(self, world: World, clock: _Clock) -> None:
        self.world = world
        self.clock = clock
        self.started: set[int] = set()
        self.ended: set[int] = set()

    def look(self) -> None:
        for node, sup in self.world.sups.items():
            for life in list(sup.lives):
                if life.pid not in self.started:
                    self.started.add(life.pid)
                    self.clock.log(f"{node}: daemon started (pid {life.pid})")
                if life.ended is not None and life.pid not in self.ended:
                    self.ended.add(life.pid)
                    how = (f"killed by the nemesis ({life.killed_by})" if life.killed_by else
                           f"exit {life.rc}: {life.last_line[:160]}")
                    self.clock.log(f"{node}: daemon pid {life.pid} ended, {how}")


def _wait_quiet(plan: Plan, world: World, clock: _Clock, lives: _Lives) -> int:
    """Wait (bounded) until every mission of the plan, and every run of its schedules, has ended; the number of
    events in the longest node log by then (0 if they did not all end)."""
    scheduled = [m for m in plan.missions if m.every is not None]
    firing_until = clock.t0 + max((m.at + SCHEDULE_FOR for m in scheduled), default=0.0) + 1.0

    def missions() -> tuple[set[str], dict[str, str]]:
        accepted: set[str] = {m.name for m in plan.missions if m.every is None}
        ended: dict[str, str] = {}
        for n in plan.nodes:
            for e in world.events(n):
                if e.get("event") == "mission:accepted":
                    accepted.add(e["missionId"])
                elif e.get("event") == "mission:completed":
                    ended[e["missionId"]] = e["data"].get("outcome")
        return accepted, ended

    deadline = time.monotonic() + QUIET_WITHIN
    while True:
        accepted, ended = missions()
        if (accepted <= set(ended) and time.time() > firing_until) or time.monotonic() > deadline:
            break
        lives.look()
        time.sleep(0.2)
    clock.log(f"{len(accepted & set(ended))}/{len(accepted)} mission(s) ended: "
              + ", ".join(f"{m} {ended.get(m, 'still running')}" for m in sorted(accepted)))
    return max((len(world.events(n)) for n in plan.nodes), default=0) if accepted <= set(ended) else 0


def _up(world: World, node: str) -> bool:
    """The node's daemon runs, has said it started, and has not said it is leaving (fenced, about to exit)."""
    life = world.sups[node].life
    return life is not None and life.leaving_at is None and any(e.get("event") == "orchestrator:started" and e["data"].get("pid") == life.pid
                                    for e in world.events(node))


def _heal_all(world: World, faults: Faults) -> None:
    """Whatever is still injected (a run that stopped half-way) is undone before the tear-down."""
    for (node, what) in list(faults.stopped):
        faults.act(Step(0, "cont", node, what))
    for node in world.plan.nodes:
        world.sups[node].up()
        if node in world.proxies:
            world.proxies[node].heal()
        if node in world.fillers:
            faults.act(Step(0, "free", node))
    if world.pg is not None:
        try:
            world.pg.psql("SELECT 1")
        except RuntimeError:
            faults.act(Step(0, "pg-up", "pg"))


def _orphans(world: World) -> list[str]:
    """Processes still alive that an agent of this run started (they carry the ledger's path in their
    environment)."""
    found = []
    marker = f"NEMESIS_LEDGER={world.ledger}".encode()
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            env = (p / "environ").read_bytes()
        except OSError:
            continue
        if marker in env.split(b"\0") and alive(int(p.name)):
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            found.append(f"pid {p.name}: {cmd[:120]}")
    return found


def _wait(cond: Callable[[], bool], seconds: float, what: str, meanwhile: Callable[[], object] | None = None) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"nemesis: {what}: not within {seconds:g} s")
        if meanwhile is not None:
            meanwhile()
        time.sleep(0.1)
