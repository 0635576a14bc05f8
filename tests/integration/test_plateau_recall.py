"""The plateau and the best score survive a restart (and a cluster's change of node): a node that did not see a
task's previous attempt reads its fix loop's scores back from the stored assessments (every backend), so the
loop stops where it would have without the restart and the task keeps its best attempt's score."""

from __future__ import annotations

from dataclasses import replace

import pytest

from polpo.assessment.pipeline import Verdict
from polpo.checks.base import CheckOutcome
from polpo.engine.stops import QualityStops
from polpo.mission.schema import MissionSpec
from polpo.model.doc import MissionDoc
from polpo.model.status import AssessmentStatus, AttemptKind, AttemptStatus
from tests.support.stores import Backend, assessment, attempt, mission, task, writing

pytestmark = pytest.mark.anyio

PLATEAU = MissionSpec.model_validate({"settings": {"plateau": {"attempts": 2, "margin": 0.1}},
                                      "tasks": [{"title": "t0", "description": "x", "assignTo": "shell"}]})


def verdict(score: float) -> Verdict:
    return Verdict(False, [CheckOutcome("llm_review", "r", False, "low", index=0, global_score=score)], "low")


async def test_a_restarted_node_counts_the_fix_loop_it_did_not_see(backend: Backend) -> None:
    store = await backend.open()
    m = mission()
    m.doc = MissionDoc.of(PLATEAU)  # "plateau": {"attempts": 2, "margin": 0.1}
    t = task(m, 0)
    # a retry began the loop: the initial attempt (4.0) is before it; 3.0, 2.9 and 2.95 were scored, and one
    # fix's assessment never completed (a crash in its review): it has no score
    history = [(AttemptKind.INITIAL, 4.0), (AttemptKind.RETRY, 3.0), (AttemptKind.FIX, 2.9), (AttemptKind.FIX, None),
               (AttemptKind.FIX, 2.95)]
    async with writing(store):
        tx = store.tx().mission(m).task(t)
        for n, (kind, score) in enumerate(history, start=1):
            a = replace(attempt(t, n, status=AttemptStatus.FINISHED), kind=kind)
            done = AssessmentStatus.COMPLETE if score is not None else AssessmentStatus.RUNNING
            tx.attempt(a).assessment(replace(assessment(a), status=done, global_score=score))
        await store.commit(tx)
        assert await store.task_scores(t.id) == [(1, "initial", 4.0), (2, "retry", 3.0), (3, "fix", 2.9),
                                                 (4, "fix", None), (5, "fix", 2.95)]
        stops = QualityStops(store, None, None)  # type: ignore[arg-type]  # recall reads only the store
        sixth = replace(attempt(t, 6), kind=AttemptKind.FIX)
        await stops.recall(t, sixth)
        assert stops.scores[t.id] == [(2, 3.0), (3, 2.9), (5, 2.95)]  # the loop since the retry
        assert stops.best[t.id] == (4.0, 1)  # the best of every attempt
        # 2.9 after 3.0, 2.9 → the last two (2.95, 2.9) do not beat 3.0 by 0.1: the loop stops here
        assert stops.plateaued(m, t, sixth, verdict(2.9)) is True
        assert stops.end(t.id) == (4.0, 1) and t.id not in stops.scores

        fresh = QualityStops(store, None, None)  # type: ignore[arg-type]
        await fresh.recall(t, replace(attempt(t, 6), kind=AttemptKind.RETRY))
        assert fresh.scores[t.id] == [] and fresh.best[t.id] == (4.0, 1)  # a retry starts a new loop

