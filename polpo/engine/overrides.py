"""A person's verdict on a finished task, over the judge's: pass work the judge failed, or fail work it passed.

Stored beside the judge's verdict (the task's status then, its global score, the attempt whose assessment holds
the per-dimension scores) with the reason, who said it and a 1..5 score, and announced by
``task:verdict:overridden``: a label for measuring the judge (``polpo labels export`` → ``polpo calibrate
--labels``), shown by ``polpo show``. What a pass of failed work then does to the task and its mission is
:mod:`polpo.engine.human_pass`'s.
"""

from __future__ import annotations

from polpo.clock import Clock, iso
from polpo.engine.refused import Refused
from polpo.events.catalog import VerdictOverridden
from polpo.model.status import TaskStatus
from polpo.store.protocol import Store

__all__ = ["human_score", "override_verdict"]


def human_score(passed: bool, score: object) -> float:
    """The person's score: the one they gave (1..5), else the end of the scale their verdict points to."""
    if isinstance(score, int | float) and not isinstance(score, bool):
        if not 1 <= score <= 5:
            raise Refused(f"the score must be from 1 to 5 (got {score:g})")
        return float(score)
    return 5.0 if passed else 1.0


async def override_verdict(store: Store, clock: Clock, task_id: str, *, passed: bool, reason: str, by: str,
                           score: object = None) -> str:
    if not reason.strip():
        raise Refused("say why: an override needs a reason (--reason)")
    mid = task_id.rsplit(":", 1)[0]
    loaded = await store.load_mission(mid)
    task = loaded.mission.tasks.get(task_id) if loaded is not None else None
    if loaded is None or task is None:
        raise Refused(f"no task {task_id!r}; see `polpo status --all`")
    if not task.terminal:
        raise Refused(f"task {task_id} is {task.status}: only a finished task's verdict can be overridden")
    value = human_score(passed, score)
    judge_passed = task.status is TaskStatus.DONE
    attempt = loaded.attempts.get(task_id)
    tx = store.tx().override((task_id, mid, int(passed), value, int(judge_passed), task.score,
                              attempt.id if attempt is not None else None, reason, by, iso(clock.now())))
    tx.event(VerdictOverridden(passed=passed, was_passed=judge_passed, reason=reason, by=by), mission_id=mid,
             task_id=task_id)
    await store.commit(tx)
    if tx.error is not None:
        raise Refused(f"the override of {task_id} was not stored: {tx.error}")
    return f"{task_id}: verdict overridden to {'pass' if passed else 'fail'} (its checks said " \
           f"{'pass' if judge_passed else 'fail'})"
