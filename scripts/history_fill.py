"""A store with a history: N finished 3-task missions written through the store's own write path, quickly.

Used by ``scripts/bench_history.py`` (and by hand: ``python scripts/history_fill.py STATE_DIR N``). Each mission
is what a real run of a 3-task mission of the ``noop`` agent leaves behind, written as the daemon writes it
(``Store.commit`` of ``Tx`` batches: the rows and the events in one transaction): the mission row with its
report, 3 done tasks, their attempts (prompt, files), assessments and checks, the mission file's source row and
29 events. The mission files are written too (``files``: ``"keep"`` leaves them in the missions folder, as a
daemon that leaves finished files in place does; ``"done"`` puts them in ``missions/done/``; ``"none"`` writes
none). The events are in the store; ``events.jsonl`` is left as a log rotated away would leave it (empty, with
its position file at the last event), so a daemon started on the state does not copy the history into it.
"""

from __future__ import annotations

import hashlib
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from polpo.checks.base import CheckOutcome
from polpo.clock import FakeClock
from polpo.events import catalog as E
from polpo.mission.loader import load_mission
from polpo.model.doc import MissionDoc
from polpo.model.records import Assessment, Attempt, Mission, Task
from polpo.model.status import (
    AssessmentStatus,
    AttemptKind,
    AttemptStatus,
    MissionStatus,
    SourceOutcome,
    TaskStatus,
)
from polpo.store.core import StoreCore

__all__ = ["BATCH", "doc_bytes", "fill"]

BATCH = 250  # missions per transaction

_FILES_NOTE = "shared workspace: changes not attributed (task m:3 ran in it meanwhile)"
_FILES = {"created": [], "modified": [], "deleted": [], "attributed": False, "tracking": "watch", "note": _FILES_NOTE}


try:
    from polpo.store.rows import SourceRecord

    def _source(tx: Any, path: str, digest: str, mid: str, at: datetime) -> Any:
        return tx.source(SourceRecord(path, digest, SourceOutcome.ACCEPTED, mid, 1), at)
except ImportError:  # a tree from before issue 31 (an A/B run against it)
    def _source(tx: Any, path: str, digest: str, mid: str, at: datetime) -> Any:
        return tx.source(path, digest, SourceOutcome.ACCEPTED, mid, at)


def doc_bytes(i: int) -> bytes:
    """The mission file of mission ``i``: three tasks of the noop agent, one with a check."""
    return orjson.dumps({"name": f"h{i}", "description": "a finished mission of the history benchmark",
                         "tasks": [{"title": "a", "description": "write a", "assignTo": "noop",
                                    "expectations": [{"type": "file_exists", "path": "polpo.toml"}]},
                                   {"title": "b", "description": "write b", "assignTo": "noop", "dependsOn": ["a"]},
                                   {"title": "c", "description": "write c", "assignTo": "noop"}]},
                        option=orjson.OPT_INDENT_2)


def _report(mid: str) -> dict[str, Any]:
    tasks = [{"id": f"{mid}:{k}", "title": t, "status": "done", "attempts": 1, "retries": 0, "fixes": 0,
              "score": None, "duration": 0.05} for k, t in ((1, "a"), (2, "b"), (3, "c"))]
    return {"summary": "completed: 3/3 tasks done in 0.4 s", "outcome": "completed", "allPassed": True,
            "tasks": {"total": 3, "done": 3, "failed": 0, "cancelled": 0}, "taskList": tasks,
            "quality": {"average": None, "threshold": None, "passed": True}, "gates": [],
            "duration": 0.4, "spend": {"tokensIn": 0, "tokensOut": 0, "usd": 0.0}}


def _one(store: StoreCore, clock: FakeClock, i: int, folder: Path, state: Path, doc: MissionDoc, raw: bytes,
         ) -> tuple[Any, str, bytes]:
    """The transaction of mission ``i`` (not submitted), its source path and its file's bytes."""
    mid = f"h{i}"
    source = str(folder / f"{mid}.json")
    digest = hashlib.sha256(raw).hexdigest()
    now = clock.now()
    m = Mission(id=mid, seq=i + 1, name=mid, source=source, hash=digest, run=1, doc=doc,
                workspace=state / "workspaces" / mid, status=MissionStatus.RUNNING, created_at=now)
    tx = _source(store.tx().mission(m), source, digest, mid, now)
    tx.event(E.MissionAccepted(name=mid, file=source, hash=digest, run=1, task_count=3, workspace=str(m.workspace),
                               warnings=[]), mission_id=mid)
    end = now + timedelta(milliseconds=400)
    for k, title in enumerate(("a", "b", "c")):
        tid = f"{mid}:{k + 1}"
        t = Task(id=tid, mission_id=mid, idx=k, title=title, agent="noop", doc=doc, status=TaskStatus.DONE,
                 updated_at=end, attempts=1, started_at=now, finished_at=end)
        tx.task(t).event(E.TaskCreated(title=title, agent="noop", depends_on=["a"] if title == "b" else [],
                                       priority=1.0), mission_id=mid, task_id=tid)
        a = Attempt(id=f"{tid}/1", task_id=tid, mission_id=mid, number=1, kind=AttemptKind.INITIAL, agent="noop",
                    status=AttemptStatus.FINISHED, started_at=now, prompt=f"# {title}\n\nwrite {title}\n\nMission: "
                    f"{mid}\n", pid=20000 + k, exit_code=0, duration=0.0129, files=_FILES, verdict="passed",
                    finished_at=end)
        asm = Assessment(id=f"{a.id}/1", attempt_id=a.id, task_id=tid, trigger=AttemptKind.INITIAL,
                         status=AssessmentStatus.COMPLETE, created_at=end, passed=True, finished_at=end,
                         message="1/1 checks passed" if k == 0 else "no checks")
        tx.attempt(a).assessment(asm)
        if k == 0:
            tx.check(asm.id, tid, CheckOutcome(type="file_exists", label="polpo.toml", passed=True,
                                               message="1/1 file(s) exist", details="polpo.toml", duration=0.0093,
                                               index=0, tier="checks"), end)
        for frm, to, trig in (("pending", "assigned", "dispatch"), ("assigned", "in_progress", "spawned")):
            tx.event(E.TaskTransition(from_=frm, to=to, trigger=trig, attempt=1, kind="initial", agent="noop"),
                     mission_id=mid, task_id=tid)
        tx.event(E.AgentSpawned(agent_name="noop", attempt=1, pid=20000 + k, kind="initial", model=None),
                 mission_id=mid, task_id=tid)
        tx.event(E.AgentFinished(agent_name="noop", attempt=1, exit_code=0, duration=0.0129, timed_out=False,
                                 error=None, files_changed=0, files_note=_FILES_NOTE), mission_id=mid, task_id=tid)
        tx.event(E.TaskTransition(from_="in_progress", to="review", trigger="finished", exit_code=0),
                 mission_id=mid, task_id=tid)
        tx.event(E.AssessmentStarted(attempt=1, trigger="initial", total=1 if k == 0 else 0), mission_id=mid,
                 task_id=tid)
        tx.event(E.AssessmentComplete(attempt=1, trigger="initial", passed=True, checks_passed=True,
                                      message=asm.message or "", global_score=None, scores=None, tier="checks"),
                 mission_id=mid, task_id=tid)
        tx.event(E.TaskTransition(from_="review", to="done", trigger="passed"), mission_id=mid, task_id=tid)
    m.status, m.finished_at, m.report = MissionStatus.COMPLETED, end, _report(mid)
    tx.mission(m).event(E.MissionCompleted(outcome="completed", all_passed=True, report=m.report), mission_id=mid)
    return tx, source, raw


async def fill(store: StoreCore, clock: FakeClock, n: int, *, missions_dir: Path, state_dir: Path,
               files: str = "keep", span: timedelta = timedelta(days=30), first: int = 0) -> None:
    """Missions ``first`` … ``first + n - 1`` (ids ``h<i>``), spread evenly over ``span`` of the clock's time
    (the clock ends ``span`` later). The store's writer must be running."""
    spec = load_mission(doc_bytes(0), known_agents=None).spec
    assert spec is not None
    doc = MissionDoc.of(spec)
    step = span.total_seconds() / max(1, n)
    where = {"keep": missions_dir, "done": missions_dir / "done", "none": missions_dir}[files]
    where.mkdir(parents=True, exist_ok=True)
    for start in range(first, first + n, BATCH):
        txs = []
        for i in range(start, min(first + n, start + BATCH)):
            tx, source, raw = _one(store, clock, i, missions_dir, state_dir, doc, doc_bytes(i))
            store.submit(tx)
            txs.append(tx)
            if files != "none":
                (where / Path(source).name).write_bytes(raw)
            clock.advance(step)
        await store.flush()


def write_rotated_log(state_dir: Path, identity: str, last_seq: int) -> None:
    """``events.jsonl`` as logrotate leaves it after a rotation: empty, its position file at ``last_seq``."""
    (state_dir / "events.jsonl").write_bytes(b"")
    (state_dir / "events.jsonl.pos").write_bytes(f"{identity} {last_seq}\n".encode().ljust(64))


async def _main(state_dir: Path, n: int) -> None:
    from polpo.store.sqlite import SqliteStore

    clock = FakeClock(datetime.now(UTC) - timedelta(days=30))
    store = await SqliteStore.open(state_dir / "polpo.db", clock=clock)
    import anyio

    async with anyio.create_task_group() as tg:
        tg.start_soon(store.run_writer)
        await fill(store, clock, n, missions_dir=state_dir.parent / "missions", state_dir=state_dir)
        tg.cancel_scope.cancel()
    await store.close()
    write_rotated_log(state_dir, store.identity, store.last_seq)


if __name__ == "__main__":
    import anyio

    # resolved: the files' records hold absolute paths, as the daemon's do (a relative folder's records named
    # paths the daemon did not know, so it took the files for new ones and ran every mission again)
    anyio.run(_main, Path(sys.argv[1]).resolve(), int(sys.argv[2]))
