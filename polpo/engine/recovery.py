"""Start-up: rebuild the engine's working copy from the store and clean up after a crash.

An attempt whose agent was running when the daemon died is recorded as ``interrupted``; its orphaned process
group is killed (found by pid — checked against pid reuse — and by an environment marker, which also finds
grandchildren that changed group); the task runs again. That re-run does not consume a retry, because the
agent never produced a result; after 3 interruptions in a row it counts as a failed run, so a task that
crashes the daemon cannot loop forever. An attempt whose result was stored is never run again: its checks
resume from the stored result.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import orjson

from polpo.clock import parse_iso
from polpo.engine.engine import Engine
from polpo.engine.model import Assessment, Attempt, Mission, Task
from polpo.events import catalog as E
from polpo.mission.schema import MissionSpec
from polpo.tools.procs import find_processes_with_env, process_start_ticks

log = logging.getLogger("polpo.recovery")

MAX_INTERRUPTIONS = 3


def _dt(v: str | None) -> Any:
    return parse_iso(v) if v else None


async def load_state(engine: Engine) -> None:
    """Load sources, run counters and every unfinished mission into the engine."""
    from polpo.engine.engine import SourceInfo

    store = engine.store
    for r in await store.fetchall("SELECT path, hash, outcome, mission_id FROM sources"):
        engine.sources[r["path"]] = SourceInfo(r["hash"], r["outcome"], r["mission_id"])
    for r in await store.fetchall("SELECT id, source, run, seq FROM missions"):
        engine.mission_ids.add(r["id"])
        engine.runs[r["source"]] = max(engine.runs.get(r["source"], 0), r["run"])
        engine.next_seq = max(engine.next_seq, r["seq"] + 1)
    for r in await store.fetchall(
            "SELECT id FROM missions WHERE status IN ('running', 'cancelling') ORDER BY seq"):
        m = await load_mission(engine, r["id"])
        if m is not None:
            engine.add_mission(m)
    await engine.sla.load(list(engine.missions))


async def load_mission(engine: Engine, mid: str) -> Mission | None:
    store = engine.store
    rows = await store.fetchall("SELECT * FROM missions WHERE id = ?", (mid,))
    if not rows:
        return None
    r = rows[0]
    spec = MissionSpec.model_validate_json(r["spec"])
    m = Mission(id=r["id"], seq=r["seq"], name=r["name"], source=r["source"], hash=r["hash"], run=r["run"],
                spec=spec, workspace=Path(r["workspace"]), status=r["status"],
                created_at=parse_iso(r["created_at"]), warnings=orjson.loads(r["warnings"]),
                reason=r["reason"], report=orjson.loads(r["report"]) if r["report"] else None,
                finished_at=_dt(r["finished_at"]))
    for g in await store.fetchall("SELECT name, status FROM gates WHERE mission_id = ?", (mid,)):
        m.gate_state[g["name"]] = g["status"]
    for t in await store.fetchall("SELECT * FROM tasks WHERE mission_id = ? ORDER BY idx", (mid,)):
        task = Task(id=t["id"], mission_id=mid, idx=t["idx"], title=t["title"], agent=t["agent"],
                    spec=spec.tasks[t["idx"]], status=t["status"], updated_at=parse_iso(t["updated_at"]),
                    reason=t["reason"], attempts=t["attempts"], retries=t["retries"],
                    fix_attempts=t["fix_attempts"], total_fixes=t["total_fixes"],
                    interruptions=t["interruptions"], next_kind=t["next_kind"], feedback=t["feedback"],
                    started_at=_dt(t["started_at"]), finished_at=_dt(t["finished_at"]), score=t["score"],
                    escalation_level=t["escalation_level"], model=t["model"], judge_used=bool(t["judge_used"]),
                    expectations=orjson.loads(t["expectations"]) if t["expectations"] else None,
                    approval=t["approval"])
        m.tasks[task.id] = task
    for a in await store.fetchall(
            "SELECT * FROM attempts WHERE mission_id = ? ORDER BY task_id, number", (mid,)):
        engine.attempts[a["task_id"]] = _attempt(a)
    engine.wire(m)
    return m


def _attempt(a: Any) -> Attempt:
    return Attempt(id=a["id"], task_id=a["task_id"], mission_id=a["mission_id"], number=a["number"],
                   kind=a["kind"], agent=a["agent"], status=a["status"], started_at=parse_iso(a["started_at"]),
                   prompt=a["prompt"] or "", pid=a["pid"], pid_ticks=a["pid_ticks"], exit_code=a["exit_code"],
                   signal=a["signal"], timed_out=bool(a["timed_out"]), error=a["error"],
                   stdout_tail=a["stdout_tail"] or "", stderr_tail=a["stderr_tail"] or "",
                   stdout_bytes=a["stdout_bytes"] or 0, stderr_bytes=a["stderr_bytes"] or 0,
                   duration=a["duration"], files=orjson.loads(a["files"]) if a["files"] else None,
                   verdict=a["verdict"], finished_at=_dt(a["finished_at"]), model=a["model"],
                   outcomes=orjson.loads(a["outcomes"]) if a["outcomes"] else None, tokens=a["tokens"],
                   cost=a["cost"])


async def load_open_assessment(engine: Engine, attempt: Attempt) -> Assessment | None:
    rows = await engine.store.fetchall(
        "SELECT * FROM assessments WHERE attempt_id = ? AND status = 'running' ORDER BY id DESC LIMIT 1",
        (attempt.id,))
    if not rows:
        return None
    r = rows[0]
    a = Assessment(id=r["id"], attempt_id=r["attempt_id"], task_id=r["task_id"], trigger=r["trigger"],
                   status=r["status"], created_at=parse_iso(r["created_at"]))
    for c in await engine.store.fetchall("SELECT * FROM checks WHERE assessment_id = ? ORDER BY idx", (a.id,)):
        row = {"index": c["idx"], "type": c["type"], "label": c["label"], "passed": bool(c["passed"]),
               "message": c["message"], "details": c["details"], "duration": c["duration"]}
        if c["scores"]:
            row.update(orjson.loads(c["scores"]))
        a.checks.append(row)
    return a


async def recover(engine: Engine) -> None:
    """Reconcile loaded missions with reality: orphans killed, interrupted runs re-queued, checks resumed."""
    from polpo.engine.runner import attempt_mark

    store = engine.store
    tx = store.tx()
    orphans: list[int] = []
    for m in list(engine.missions.values()):
        for task in m.tasks.values():
            attempt = engine.attempts.get(task.id)
            if task.status in ("assigned", "in_progress"):
                if attempt is not None and attempt.status in ("starting", "running"):
                    orphans.extend(_orphan_groups(attempt, attempt_mark(engine, attempt.id)))
                    attempt.status = "interrupted"
                    attempt.error = "interrupted: the daemon stopped while the agent ran"
                    attempt.finished_at = engine.clock.now()
                    tx.attempt(attempt)
                previous = task.status
                task.interruptions += 1
                tx.event(E.TASK_RECOVERED, mission_id=m.id, task_id=task.id, previousStatus=previous,
                         attempt=attempt.number if attempt else None, action="run again",
                         interruptions=task.interruptions)
                engine.transition(tx, task, "interrupted",
                                  "the daemon stopped while the agent ran; it runs again")
                if task.interruptions >= MAX_INTERRUPTIONS:
                    _count_as_failure(engine, tx, task)
            elif task.status == "review" and attempt is not None and attempt.status == "finished":
                tx.event(E.TASK_RECOVERED, mission_id=m.id, task_id=task.id, previousStatus="review",
                         attempt=attempt.number, action="resume checks")
                engine.resuming.add(task.id)
    await _kill(orphans)
    await store.commit(tx)
    for m in list(engine.missions.values()):
        if m.status == "cancelling":
            m.status = "running"
            engine.cancel_mission(m.id, by="recovery")
            continue
        if m.open_tasks <= 0:
            engine.complete_mission(m)
            continue
        for task in m.tasks.values():
            if task.id in engine.resuming:
                engine.queue.push(task.spec.priority, m.seq, task.idx, task.id)
            else:
                engine.make_ready(task)
    engine.wake()


def _count_as_failure(engine: Engine, tx: Any, task: Task) -> None:
    max_retries, _ = engine.budget(task)
    task.interruptions = 0
    if task.retries < max_retries:
        task.retries += 1
        task.fix_attempts = 0
        task.next_kind = "retry"
        tx.event(E.TASK_RETRY, mission_id=task.mission_id, task_id=task.id, attempt=task.retries,
                 maxRetries=max_retries, reason=f"interrupted {MAX_INTERRUPTIONS} times")
        tx.task(task)
    else:
        tx.event(E.TASK_MAX_RETRIES, mission_id=task.mission_id, task_id=task.id, retries=task.retries,
                 maxRetries=max_retries)
        engine.transition(tx, task, "dispatch")
        engine.transition(tx, task, "spawned")
        engine.transition(tx, task, "finished")
        engine.transition(tx, task, "exhausted", f"interrupted {MAX_INTERRUPTIONS} times; retries exhausted")
        engine.after_change(task)


def _orphan_groups(attempt: Attempt, mark: str) -> list[int]:
    from polpo.engine.runner import ATTEMPT_MARK

    groups: set[int] = set()
    if attempt.pid and attempt.pid_ticks is not None and process_start_ticks(attempt.pid) == attempt.pid_ticks:
        groups.add(attempt.pid)
    for pid in find_processes_with_env(ATTEMPT_MARK, mark):
        try:
            groups.add(os.getpgid(pid))
        except ProcessLookupError:
            continue
    return sorted(groups)


async def _kill(groups: list[int], grace: float = 2.0) -> None:
    if not groups:
        return
    for g in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(g, signal.SIGTERM)
    with anyio.move_on_after(grace):
        while any(_alive(g) for g in groups):  # noqa: ASYNC110 - polling processes we do not own
            await anyio.sleep(0.05)
    for g in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(g, signal.SIGKILL)
    log.warning("killed %d orphaned process group(s) of a previous daemon", len(groups))


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False
