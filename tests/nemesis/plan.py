"""A seed becomes a plan: the topology, the workload and the faults with when each is injected and healed.

Pure and deterministic (``random.Random(seed)``, nothing else): a failing seed reruns with the same schedule.
What the schedule meets when it runs (which agent is running, who leads) is the system's; the timeline the run
prints says what each step found.

A fault is a few :class:`Step` s, each one action of :mod:`.faults` on one target at an offset from the start of
the run: ``kill -9`` of a guard and 0.4 s later of its daemon is one fault made of two pieces. Faults on one
target never overlap (the next waits for the previous one to heal); faults on different targets may. A fault
on the guard or the agents targets ``busiest#N``: the node that runs the most agents when it begins (a guard
killed on an idle node proves little), the same node for all its steps.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["BUSIEST", "FAULTS", "TOPOLOGIES", "Fault", "MissionSpec", "Plan", "Step", "TaskSpec", "make_plan"]

TOPOLOGIES: dict[str, tuple[str, ...]] = {"sqlite": ("solo",), "pg2": ("a", "b"), "pg3": ("a", "b", "c")}
LEASE = 2.0  # seconds, for the PostgreSQL nodes (the tests' usual lease: takeovers within seconds)
LLM_LEASE = 4.0  # with LLM agents: importing litellm (~4 s of CPU) may stall a loaded machine's event loop 1 s
RESTARTS = (0.5, 0.5, 2.0, 5.0)  # the service manager's delay (the shipped unit's RestartSec is 5)
BUSIEST = "busiest#"  # a target resolved when its fault begins: the node running the most agents then
WINDOW = (2.0, 14.0)  # faults start within this span of seconds after the workload is submitted
APPROVE_AFTER = 3.0  # seconds a task with "approval": "before" waits before its timeout approves it
SCHEDULE_FOR = 12.0  # seconds a scheduled mission keeps firing after its file was dropped in
LLM_SHARE = 0.3  # of the seeds whose workload has LLM tasks (and provider faults)
LLM_BUDGET = 12_000  # tokens, each LLM task's budget (two attempts of two calls fit; a third call does not)


@dataclass(frozen=True)
class Step:
    """One action (a verb of :mod:`.faults`) on a target (a node's name, ``pg`` or ``provider``) at ``at`` s."""

    at: float
    verb: str
    target: str
    arg: str = ""

    def __str__(self) -> str:
        return f"{self.verb} {self.target}" + (f" {self.arg}" if self.arg else "")


@dataclass(frozen=True)
class Fault:
    kind: str
    target: str
    steps: tuple[Step, ...]

    @property
    def start(self) -> float:
        return self.steps[0].at

    @property
    def end(self) -> float:
        return self.steps[-1].at

    def __str__(self) -> str:
        t0 = self.start
        rest = "; ".join(f"+{s.at - t0:.1f} s {s}" if s.at > t0 else str(s) for s in self.steps)
        return f"{self.kind:<18} {rest}"


@dataclass(frozen=True)
class TaskSpec:
    title: str
    seconds: float  # of work (beating) before the agent ends
    flaky: bool  # fails its first attempt (exit 1): the policy sends a fix
    after: tuple[str, ...] = ()
    llm: bool = False  # done by the LLM agent through the node's provider (tests/nemesis/provider.py) instead


@dataclass(frozen=True)
class MissionSpec:
    """A mission file; besides its tasks, what the leader decides with its own timers and what a person does:
    ``delay`` (after, blocks, seconds), ``approval`` (a task that waits for a person, approved by its timeout of
    :data:`APPROVE_AFTER` s), ``checkpoint`` (after, blocks: the nemesis, as the person, resumes it),
    ``every`` (seconds: the file is a schedule whose runs fire that often until :data:`SCHEDULE_FOR` s after it
    was dropped in)."""

    name: str
    at: float  # seconds after the start when its file is dropped into the missions folder
    tasks: tuple[TaskSpec, ...]
    delay: tuple[str, str, float] | None = None
    approval: str | None = None
    checkpoint: tuple[str, str] | None = None
    every: float | None = None

    def features(self) -> list[str]:
        return [k for k in ("delay", "approval", "checkpoint", "every") if getattr(self, k) is not None]


@dataclass(frozen=True)
class Plan:
    seed: int
    topology: str
    lease: float
    missions: tuple[MissionSpec, ...]
    faults: tuple[Fault, ...] = field(default=())
    restart: float = 0.5  # seconds the service manager waits before it starts an exited daemon again
    narrowed: tuple[str | None, tuple[str, ...] | None] = (None, None)  # make_plan's topology and kinds

    def rerun(self) -> str:
        """The command that runs this plan again: a narrowed seed is another plan, so its narrowing is part of it."""
        topology, kinds = self.narrowed
        return (f"scripts/nemesis.py --seed {self.seed}" + (f" --topology {topology}" if topology else "")
                + (f" --faults {','.join(kinds)}" if kinds else ""))

    @property
    def nodes(self) -> tuple[str, ...]:
        return TOPOLOGIES[self.topology]

    @property
    def postgres(self) -> bool:
        return self.topology != "sqlite"

    @property
    def healed_at(self) -> float:
        """When the last fault is over (its last step done), in seconds after the start."""
        return max((f.end for f in self.faults), default=0.0)

    def steps(self) -> list[Step]:
        return sorted((s for f in self.faults for s in f.steps), key=lambda s: s.at)

    def kinds(self) -> set[str]:
        return {f.kind for f in self.faults}

    @property
    def llm(self) -> bool:
        return any(t.llm for m in self.missions for t in m.tasks)

    def describe(self) -> str:
        n = sum(len(m.tasks) for m in self.missions)
        head = (f"seed {self.seed}: {self.topology} (nodes {', '.join(self.nodes)}"
                + (f"; lease {self.lease:g} s" if self.postgres else "") + f"; restart after {self.restart:g} s), "
                f"{len(self.missions)} mission(s) "
                f"of {n} task(s), {len(self.faults)} fault(s), all healed by +{self.healed_at:.1f} s")
        work = [f"  mission {m.name} at +{m.at:.1f} s: {len(m.tasks)} task(s)"
                + (f" ({sum(t.llm for t in m.tasks)} by the LLM agent)" if any(t.llm for t in m.tasks) else "")
                + "".join(f", {k} {getattr(m, k)}" for k in m.features()) for m in self.missions]
        return "\n".join([head, *work, *(f"  +{f.start:5.1f} s  {f}" for f in self.faults)])


# -- the fault kinds ------------------------------------------------------------------------------------------

Build = Callable[[random.Random, str, float, float], tuple[Step, ...]]


def _pause(verb_target: str) -> Build:
    def build(rng: random.Random, node: str, t: float, lease: float) -> tuple[Step, ...]:
        d = rng.uniform(0.3, 3.5 * lease)  # short ones, and ones past the lease and its take-over margin
        return Step(t, "stop", node, verb_target), Step(t + d, "cont", node, verb_target)
    return build


def _instant(verb: str, what: str) -> Build:
    def build(rng: random.Random, node: str, t: float, lease: float) -> tuple[Step, ...]:
        return (Step(t, verb, node, what),)
    return build


def _kill_node(rng: random.Random, node: str, t: float, lease: float) -> tuple[Step, ...]:
    """A machine that crashes (daemon, guard and agents at once) and comes back after a while."""
    return Step(t, "kill", node, "node"), Step(t + rng.uniform(0.5, 3 * lease), "up", node)


def _guard_then_daemon(rng: random.Random, node: str, t: float, lease: float) -> tuple[Step, ...]:
    """Issue 28's break 1: the guard dies, then its daemon: nothing may be left running."""
    return Step(t, "kill", node, "guard"), Step(t + rng.uniform(0.2, 2.0), "kill", node, "daemon")


def _guard_then_pause(rng: random.Random, node: str, t: float, lease: float) -> tuple[Step, ...]:
    """Break 1 again: the guard dies, then the daemon is paused past its lease while others take its tasks."""
    stop = t + rng.uniform(0.2, 2.0)
    return (Step(t, "kill", node, "guard"), Step(stop, "stop", node, "daemon"),
            Step(stop + rng.uniform(2.0 * lease, 4.0 * lease), "cont", node, "daemon"))


def _for(verb: str, off: str, low: float, high: float, arg: Callable[[random.Random], str] | None = None) -> Build:
    def build(rng: random.Random, target: str, t: float, lease: float) -> tuple[Step, ...]:
        d = rng.uniform(low * lease, high * lease)
        return Step(t, verb, target, arg(rng) if arg else ""), Step(t + d, off, target)
    return build


def _pg(mode: str) -> Build:
    def build(rng: random.Random, target: str, t: float, lease: float) -> tuple[Step, ...]:
        return Step(t, "pg-down", "pg", mode), Step(t + rng.uniform(0.5, 3 * lease), "pg-up", "pg")
    return build


@dataclass(frozen=True)
class Kind:
    build: Build
    topologies: tuple[str, ...]  # where it makes sense
    target: str = "node"  # node | pg | busiest (the node that runs most agents when the fault begins)
    weight: float = 1.0


_ALL = ("sqlite", "pg2", "pg3")
_PG = ("pg2", "pg3")
FAULTS: dict[str, Kind] = {
    "kill-daemon": Kind(_instant("kill", "daemon"), _ALL, weight=2),
    "pause-daemon": Kind(_pause("daemon"), _ALL, weight=2),
    "kill-guard": Kind(_instant("kill", "guard"), _ALL, target="busiest"),
    "pause-guard": Kind(_pause("guard"), _ALL),
    "kill-agent": Kind(_instant("kill", "agent"), _ALL, target="busiest"),
    "pause-agent": Kind(_pause("agent"), _ALL, weight=0.5, target="busiest"),
    "kill-node": Kind(_kill_node, _ALL),
    "pause-node": Kind(_pause("node"), _ALL, weight=0.5),
    "guard-then-daemon": Kind(_guard_then_daemon, _ALL, weight=1.5, target="busiest"),
    "guard-then-pause": Kind(_guard_then_pause, _PG, weight=1.5, target="busiest"),
    "blackhole": Kind(_for("cut", "mend", 0.5, 4.0), _PG, weight=1.5),
    "long-blackhole": Kind(_for("cut", "mend", 8.0, 12.0), _PG, weight=0.5),  # issue 28's break 3 took 18 s+
    "reset": Kind(_instant("reset", ""), _PG),
    "latency": Kind(_for("slow", "mend", 1.0, 4.0, lambda r: f"{r.choice((50, 200, 800))}ms"), _PG, weight=0.5),
    "pg-stop-fast": Kind(_pg("fast"), _PG, target="pg", weight=0.5),
    "pg-stop-immediate": Kind(_pg("immediate"), _PG, target="pg", weight=0.5),
    "pg-kill": Kind(_pg("kill"), _PG, target="pg", weight=0.5),
    "disk-full": Kind(_for("fill", "free", 1.0, 4.0), _ALL, weight=0.7),
    "read-only": Kind(_for("ro", "rw", 1.0, 4.0), _ALL, weight=0.5),
    # the model provider, in seeds whose workload has LLM tasks
    "provider-slow": Kind(_for("llm", "llm-ok", 1.0, 4.0, lambda r: "slow"), _ALL),
    "provider-errors": Kind(_for("llm", "llm-ok", 1.0, 4.0, lambda r: r.choice(("429", "500"))), _ALL),
    "provider-kill": Kind(_instant("llm", "kill"), _ALL),
}


# -- the workload ---------------------------------------------------------------------------------------------

def _mission(rng: random.Random, name: str, at: float, llm: bool) -> MissionSpec:
    n = rng.randint(4, 8)
    tasks: list[TaskSpec] = []
    for i in range(n):
        earlier = [t.title for t in tasks]
        after = tuple(rng.sample(earlier, k=min(len(earlier), rng.choice((0, 0, 1, 2)))))
        tasks.append(TaskSpec(f"{name}-{i + 1}", round(rng.uniform(1.5, 5.0), 1), rng.random() < 0.2, after,
                              llm=llm and rng.random() < 0.4))
    titles = [t.title for t in tasks]
    # (after, blocks) for a delay or a checkpoint: the blocked task comes later (a dependency is always earlier)
    first, second = sorted(rng.sample(titles, 2), key=titles.index)
    gate = (first, second) if rng.random() < 0.5 else None
    return MissionSpec(
        name, at, tuple(tasks),
        delay=(gate[0], gate[1], round(rng.uniform(1.0, 4.0), 1)) if gate and rng.random() < 0.5 else None,
        approval=rng.choice(titles) if rng.random() < 0.3 else None,
        checkpoint=gate if gate and rng.random() < 0.5 else None,
        every=round(rng.uniform(3.0, 6.0), 1) if rng.random() < 0.15 and not llm else None)


def make_plan(seed: int, *, topology: str | None = None, kinds: tuple[str, ...] | None = None) -> Plan:
    """The plan of ``seed``. ``topology`` and ``kinds`` narrow what is drawn (the seed still decides the rest)."""
    rng = random.Random(seed)
    topo = topology or rng.choice(sorted(TOPOLOGIES))
    nodes = TOPOLOGIES[topo]
    n = rng.choice((2, 3, 3))  # dropped in over the fault window, so faults meet running agents
    llm = rng.random() < LLM_SHARE
    missions = tuple(_mission(rng, f"m{i + 1}", round(i * WINDOW[1] / n + rng.uniform(0.0, 2.0), 1), llm)
                     for i in range(n))
    llm = any(t.llm for m in missions for t in m.tasks)
    lease = LLM_LEASE if llm else LEASE
    allowed = [k for k, kind in FAULTS.items() if topo in kind.topologies and (kinds is None or k in kinds)
               and (llm or not k.startswith("provider-"))]
    if not allowed:
        raise ValueError(f"no fault kind of {kinds} fits the topology {topo}")
    weights = [FAULTS[k].weight for k in allowed]
    busy: dict[str, float] = {}
    faults: list[Fault] = []
    for i in range(rng.randint(2, 4)):
        kind = rng.choices(allowed, weights)[0]
        target = "pg" if FAULTS[kind].target == "pg" else rng.choice(nodes)
        if FAULTS[kind].target == "busiest":
            target = f"{BUSIEST}{i + 1}"  # resolved when it begins (faults.py): the node running most agents
        t = max(rng.uniform(*WINDOW), busy.get(target, 0.0) + rng.uniform(0.3, 2.0))
        steps = FAULTS[kind].build(rng, target, round(t, 2), lease)
        steps = tuple(Step(round(s.at, 2), s.verb, s.target, s.arg) for s in steps)
        busy[target] = steps[-1].at
        faults.append(Fault(kind, target, steps))
    restart = rng.choice(RESTARTS)  # (drawn last: the draws above stay those of earlier versions of a seed)
    return Plan(seed, topo, lease, missions, tuple(sorted(faults, key=lambda f: f.start)), restart,
                (topology, tuple(kinds) if kinds is not None else None))
