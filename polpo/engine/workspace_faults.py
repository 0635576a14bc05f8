"""An agent that failed because its workspace's file system did: full, over quota, read-only.

A full disk is the environment's fault, as it is for polpo's own writes (:mod:`polpo.fsfaults`): it must not
spend one of the task's retries or fixes, nor fail it. What an agent prints is no evidence (any program may
print "No space left on device"), so the file system is asked, right after the agent's failure: a probe file in
the workspace is created and given its first blocks (``posix_fallocate``: a full disk or quota refuses them at
once, not at a later flush) and removed. Refused with ENOSPC, EDQUOT or EROFS, the failure is blamed on the file
system: the attempt is interrupted (no retry used, the task back to pending, ``fault:paused``), the turn keeps
its slot and probes again with the one backoff until the workspace takes writes (``fault:resumed``), and the
task runs again. The probe succeeding means the agent failed on its own (or the space came back meanwhile): its
failure counts as any other.

An agent that filled the disk itself and left its files there waits too, until a person frees the space: the
``fault:paused`` event and the log line say where.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import anyio

from polpo.engine.board import MissionBoard
from polpo.engine.faults import FaultNotes, retrying
from polpo.engine.lifecycle import Trigger
from polpo.fsfaults import WORKSPACE_FULL, errno_name
from polpo.model.records import Attempt, Task
from polpo.model.status import AttemptStatus
from polpo.store.protocol import Store
from polpo.store.tx import Tx

__all__ = ["PROBE_BYTES", "WorkspaceFaults", "probe"]

PROBE_BYTES = 64 * 1024  # more than a block of any file system: the probe needs space a file's write would
_names = itertools.count()


def probe(workspace: Path) -> None:
    """Create a file in ``workspace`` with its first blocks allocated, then remove it; the file system's refusal
    (an OSError) is raised."""
    path = workspace / f".polpo-probe-{os.getpid()}-{next(_names)}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        os.posix_fallocate(fd, 0, PROBE_BYTES)
    finally:
        os.close(fd)
        os.unlink(path)


async def _probe(workspace: Path) -> None:
    await anyio.to_thread.run_sync(probe, workspace)


class WorkspaceFaults:
    def __init__(self, store: Store, board: MissionBoard, notes: FaultNotes) -> None:
        self.store = store
        self.board = board
        self.notes = notes

    @staticmethod
    async def blamed(workspace: Path) -> int | None:
        """After an agent's failure: the errno (ENOSPC, EDQUOT, EROFS) of the workspace's file system refusing
        a new file now, or None (it takes writes: the failure is the agent's)."""
        try:
            await _probe(workspace)
        except OSError as e:
            return e.errno if e.errno in WORKSPACE_FULL else None
        return None

    async def wait_out(self, tx: Tx, task: Task, attempt: Attempt, workspace: Path, code: int) -> None:
        """The attempt (its result in ``tx``) is interrupted and the task goes back to pending without using a
        retry; the turn waits for the workspace to take writes again, then the task is ready to run again."""
        attempt.status = AttemptStatus.INTERRUPTED
        attempt.error = f"its workspace's file system refused writes ({errno_name(code)})"
        self.board.transition(tx.attempt(attempt), task, Trigger.INTERRUPTED,
                              f"{attempt.error}; the attempt runs again once the workspace takes writes")
        self.store.submit(tx)
        await retrying(self.notes, "task agent", str(workspace), lambda: _probe(workspace),
                       mission_id=task.mission_id, task_id=task.id)
        self.board.after_change(task)
