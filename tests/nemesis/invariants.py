"""The invariants, each checked on the whole history from its own evidence (pure: the history in, violations out).

======================  ==========================================================================================
invariant               evidence
======================  ==========================================================================================
``no-overlap``          the ledger: no two runs of one task are alive at once (a killed run lives until its last
                        beat; the documented limit of a whole-node freeze — its agents resume with it for a
                        moment — is allowed :data:`FREEZE_ALLOWANCE` after the node's SIGCONT)
``attempt-once``        the ledger: an attempt (task, number) runs at most once
``stored-result``       the store's attempts and the ledger: a task never runs again after an attempt whose result
                        was stored passed, nor after one whose stored result was never assessed
``logs``                every node's ``events.jsonl`` against the store's events table: gapless from 1, no
                        duplicate, each line the stored event, and nothing the store had when the missions ended
                        missing
``missions-end``        the events: every mission ends within :data:`END_WITHIN` s after the last fault healed
``schedule-slot``       the events: a schedule fires at most once per slot
``agents-die``          the ledger and the supervisors: no run beats more than :data:`OUTLIVE` s after the
                        daemon that started it ended; no agent is alive once every node has stopped
``spend``               the providers' bills against the store's spend rows: every token served to a task is
                        counted, and no task's count passes its budget by more than one call
``leader-cut``          the fault timeline and the events: a leader cut off from PostgreSQL (half-open) for
                        longer than :data:`LEADER_AFTER` leases is replaced within that time
``daemons``             the supervisors: every daemon that ended by itself exited non-zero with one line
                        starting ``polpo:`` and no traceback, within :data:`LEAVE_WITHIN` s of saying it was
                        leaving; a SIGTERM at the end stops each one cleanly; each node, started again, recovered
======================  ==========================================================================================
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tests.nemesis.ledger import Run
from tests.nemesis.plan import LLM_BUDGET, Plan
from tests.nemesis.provider import COMPLETION_TOKENS, PROMPT_TOKENS
from tests.nemesis.supervisor import Life

__all__ = ["CHECKS", "PG", "History", "check"]

PG = "pg"  # History.cuts: PostgreSQL's own outages (pg-down to pg-up), for every node at once

FREEZE_ALLOWANCE = 1.0  # seconds a whole-node freeze's agents may run on after the SIGCONT (docs: Fencing, Limits)
END_WITHIN = 90.0  # seconds after the last heal by which every mission has ended
OUTLIVE = 2.0  # seconds a run may beat after its daemon ended (the guard kills at once; beats are 0.5 s apart)
CALL_TOKENS = PROMPT_TOKENS + COMPLETION_TOKENS  # one call: what a budget may be passed by (the call in flight)
LEADER_AFTER = 3.0  # leases after a cut of the leader by which another node leads (issue 28, break 2)
LEAVE_WITHIN = 15.0  # seconds from "leaving the cluster" to the exit (the stop's budget, 3 leases, its margin, 5 s)


@dataclass
class History:
    plan: Plan
    t0: float  # wall-clock seconds when the schedule began
    healed: float  # wall-clock seconds when its last step was done
    runs: list[Run]
    logs: dict[str, list[dict[str, Any]]]
    store: dict[str, list[dict[str, Any]]]
    lives: dict[str, list[Life]]
    freezes: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # node -> (SIGSTOP, SIGCONT)
    paused: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # node -> its daemon stopped (any)
    cuts: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # node -> (cut, mend) of its network;
    # PG -> (pg-down, pg-up)
    quiet_seq: int = 0  # the store's last event when every mission had ended
    stop_problems: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    served: dict[str, int] = field(default_factory=dict)  # tokens the providers served, per task


def _within(spans: list[tuple[float, float]], start: float, end: float) -> float:
    """How much of [start, end] the spans cover."""
    return sum(max(0.0, min(b, end) - max(a, start)) for a, b in spans)


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def no_overlap(h: History) -> list[str]:
    def span(r: Run) -> tuple[float, float]:
        end = r.last
        for stop, cont in h.freezes.get(r.node, []):
            if r.start < stop and stop <= end <= cont + FREEZE_ALLOWANCE:
                end = stop  # frozen with its node; what it did right after the resume is the documented limit
        return r.start, end

    out = []
    by_task: dict[str, list[Run]] = defaultdict(list)
    for r in h.runs:
        by_task[r.task].append(r)
    for task, rs in by_task.items():
        for i, a in enumerate(rs):
            for b in rs[i + 1:]:
                (s1, e1), (s2, e2) = span(a), span(b)
                both = min(e1, e2) - max(s1, s2)
                if both > 0:
                    out.append(f"task {task}: {a} and {b} were alive at once for {both:.2f} s")
    return out


def attempt_once(h: History) -> list[str]:
    seen: dict[tuple[str, int], Run] = {}
    out = []
    for r in h.runs:
        key = (r.task, r.attempt)
        if key in seen:
            out.append(f"attempt {r.task}/{r.attempt} ran twice: {seen[key]} and {r}")
        seen.setdefault(key, r)
    return out


def stored_result(h: History) -> list[str]:
    later: dict[str, int] = defaultdict(int)
    for r in h.runs:
        later[r.task] = max(later[r.task], r.attempt)
    out = []
    for a in h.store.get("attempts", []):
        task, n, last = a["task_id"], a["number"], later.get(a["task_id"], 0)
        if a["status"] != "finished" or last <= n:
            continue
        if a["verdict"] == "passed":
            out.append(f"attempt {task}/{n} passed (stored), and the task ran again as attempt {last}")
        elif a["verdict"] is None and a["exit_code"] == 0:
            out.append(f"attempt {task}/{n}'s result was stored but never assessed, and the task ran again as "
                       f"attempt {last}")
    return out


def logs(h: History) -> list[str]:
    stored = {e["seq"]: e for e in h.store.get("events", [])}
    out = []
    for node, evs in h.logs.items():
        seqs = [e.get("seq") for e in evs]
        if seqs != list(range(1, len(seqs) + 1)):
            dup = sorted({s for s in seqs if seqs.count(s) > 1 and s is not None})
            gap = next((i + 1 for i, s in enumerate(seqs) if s != i + 1), None)
            out.append(f"node {node}'s events.jsonl is not gapless from 1: first break at line {gap}"
                       + (f", duplicates {dup[:5]}" if dup else ""))
        for e in evs:
            s = stored.get(e.get("seq"))
            if s is None:
                out.append(f"node {node}'s events.jsonl has seq {e.get('seq')} ({e.get('event')}), the store has not")
                break
            mine = (e["ts"], e["event"], e.get("missionId"), e.get("taskId"), e.get("data"))
            theirs = (s["ts"], s["event"], s["mission_id"], s["task_id"], json.loads(s["data"]))
            if mine != theirs:
                out.append(f"node {node}'s events.jsonl seq {e['seq']} differs from the store: {mine[:4]} vs "
                           f"{theirs[:4]}")
                break
        if len(evs) < h.quiet_seq:
            out.append(f"node {node}'s events.jsonl ends at {len(evs)}, before the {h.quiet_seq} events stored when "
                       "the missions ended")
    return out


def missions_end(h: History) -> list[str]:
    evs = [e for e in h.store.get("events", [])]
    accepted = {e["mission_id"] for e in evs if e["event"] == "mission:accepted"}
    ended = {e["mission_id"]: _ts(e["ts"]) for e in evs if e["event"] == "mission:completed"}
    out = [f"mission {m} never ended" for m in sorted(accepted - set(ended))]
    out += [f"mission {m} ended {t - h.healed:.0f} s after the last fault healed (bound {END_WITHIN:g} s)"
            for m, t in sorted(ended.items()) if t - h.healed > END_WITHIN]
    names = {m.name for m in h.plan.missions if m.every is None}
    out += [f"mission {m} was never accepted" for m in sorted(names - accepted)]
    scheduled = {e["mission_id"] for e in evs if e["event"] == "schedule:created"}  # (it may expire unfired:
    out += [f"the schedule {m.name} was never taken in" for m in h.plan.missions  # taken in after its end date)
            if m.every is not None and m.name not in scheduled]
    return out


def schedule_slot(h: History) -> list[str]:
    seen: set[tuple[str, str]] = set()
    out = []
    for e in h.store.get("events", []):
        if e["event"] == "schedule:triggered":
            d = json.loads(e["data"])
            key = (d["scheduleId"], d["scheduledFor"])
            if key in seen:
                out.append(f"schedule {key[0]} fired twice for the slot {key[1]}")
            seen.add(key)
    return out


def agents_die(h: History) -> list[str]:
    ended = {life.pid: (node, life.ended) for node, lives in h.lives.items() for life in lives}
    out = []
    for r in h.runs:
        node, end = ended.get(r.ppid, (r.node, None))
        if end is not None and r.end is None and r.last > end + OUTLIVE:
            out.append(f"{r} beat {r.last - end:.1f} s after its daemon (pid {r.ppid} on {node}) ended")
        elif end is not None and r.end is not None and r.end > end + OUTLIVE:
            out.append(f"{r} ended {r.end - end:.1f} s after its daemon (pid {r.ppid} on {node}) ended")
    out += [f"an agent outlived every node: {o}" for o in h.orphans]
    return out


def daemons(h: History) -> list[str]:
    out = list(h.stop_problems)
    started = {e["data"].get("pid") for evs in h.logs.values() for e in evs if e.get("event") == "orchestrator:started"}
    for node, lives in h.lives.items():
        for life in lives:
            text = "\n".join(t for _, t in life.lines)
            if life.killed_by is not None:
                continue
            if life.stopped_by_harness:
                if life.rc != 0:
                    out.append(f"node {node}: pid {life.pid} exited {life.rc} on the final SIGTERM: {life.last_line}")
            elif life.rc in (None, 0) or not life.last_line.startswith("polpo:"):
                out.append(f"node {node}: pid {life.pid} exited {life.rc} without a one-line reason: "
                           f"{life.last_line[:200]!r}")
            if "Traceback" in text and not life.stopped_by_harness:
                out.append(f"node {node}: pid {life.pid} printed a traceback")
            if life.leaving_at is not None and life.ended is not None:
                ran = life.ended - life.leaving_at - _within(h.paused.get(node, []), life.leaving_at, life.ended)
                if ran > LEAVE_WITHIN:  # (time it spent stopped by the nemesis is not its own)
                    out.append(f"node {node}: pid {life.pid} said it was leaving and exited only {ran:.0f} s later "
                               "(half-alive meanwhile)")
        if not lives or lives[-1].pid not in started:
            out.append(f"node {node}: its last start (pid {lives[-1].pid if lives else '?'}) never recovered "
                       "(no orchestrator:started)")
    return out


def spend(h: History) -> list[str]:
    counted = {r["key"]: int(r["tokens"]) for r in h.store.get("spend", [])}
    out = []
    for task, served in sorted(h.served.items()):
        mine = counted.get(task, 0)
        if mine < served:
            out.append(f"task {task}: the providers served {served} tokens, the store counted {mine}")
        if mine > LLM_BUDGET + CALL_TOKENS:
            out.append(f"task {task}: {mine} tokens counted, past its budget of {LLM_BUDGET} by more than one call")
    return out


def _reachable_from(h: History, node: str, at: float) -> float:
    """From when, after ``at``, some node other than ``node`` could reach PostgreSQL for the leases a take-over
    needs: a cut of it that begins before that time is up pushes it to that cut's mend (nemesis seed 7110 cut both
    nodes within 0.04 s: nobody could lead until the other one's cut mended). PostgreSQL down is a cut of every
    node (seed 10001 stopped it during a leader's cut)."""
    window = LEADER_AFTER * h.plan.lease
    froms = []
    for n in (n for n in h.plan.nodes if n != node):
        t = at
        for c, m in sorted(h.cuts.get(n, []) + h.cuts.get(PG, [])):  # (PostgreSQL down: nobody reaches it)
            if c <= t + window and m > t:
                t = m
        froms.append(t)
    return min(froms, default=at)


def leader_cut(h: History) -> list[str]:
    leads = sorted((_ts(e["ts"]), json.loads(e["data"])["node"]) for e in h.store.get("events", [])
                   if e["event"] == "cluster:leader")
    out = []
    for node, spans in h.cuts.items():
        for cut, mend in spans:
            if mend - cut <= LEADER_AFTER * h.plan.lease:
                continue
            before = [who for t, who in leads if t <= cut]
            if not before or before[-1] != node:
                continue
            start = _reachable_from(h, node, cut)  # (no node can lead while every other one is cut off too)
            if mend - start <= LEADER_AFTER * h.plan.lease:
                continue
            if not any(cut < t <= start + LEADER_AFTER * h.plan.lease and who != node for t, who in leads):
                out.append(f"leader {node} was cut off from PostgreSQL at +{cut - h.t0:.1f} s for {mend - cut:.0f} s "
                           f"and no other node led within {LEADER_AFTER:g} leases"
                           + (f" of +{start - h.t0:.1f} s, when another could reach it" if start > cut else ""))
    return out


CHECKS: dict[str, Callable[[History], list[str]]] = {
    "no-overlap": no_overlap, "attempt-once": attempt_once, "stored-result": stored_result, "logs": logs,
    "missions-end": missions_end, "schedule-slot": schedule_slot, "agents-die": agents_die, "daemons": daemons,
    "spend": spend, "leader-cut": leader_cut}


def check(h: History) -> dict[str, list[str]]:
    """Every invariant's violations (an empty list: it held)."""
    return {name: fn(h) for name, fn in CHECKS.items()}
