"""``polpo rejudge``: the reviews of stored work, run again under another judge, without running any agent.

A judge set-up is a choice (models, seats, sampling, a calibrated rule); the way to know whether another one is
better is to run it on the work the current one already judged. For each ``llm_review`` check of a task's
assessed attempt this runs the same check (:class:`~polpo.checks.llm_review.LlmReview`) with the other config's
judges, on the same yardstick (the dimensions stored for the task), with the same evidence (the outcomes of the
cheap checks that ran before it), and on the same work: the workspace when its files still hold what the
attempt's review recorded (its ``work`` digest), else a scratch folder filled from that digest. Nothing of the
task changes; the new review is stored beside the old one (:func:`polpo.store.read.add_rejudgement`), never over
it. The caller prints what changed.
"""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from polpo.checks.base import CheckContext, CheckOutcome, Chosen
from polpo.checks.llm_review import LlmReview, LlmReviewExpectation
from polpo.clock import SystemClock
from polpo.llm.client import ChatClient, ModelSettings
from polpo.model.records import Task
from polpo.review.dimensions import dims_from_json
from polpo.review.panel import PanelOptions
from polpo.review.reviewer import ReviewerTrace
from polpo.tools.bounded_read import read_text_bounded

__all__ = ["RejudgeBackend", "Rejudged", "rejudge_check", "same_work"]


@dataclass(frozen=True)
class Rejudged:
    task_id: str
    attempt_id: str
    check_idx: int
    was_passed: bool
    was_score: float | None
    outcome: CheckOutcome
    source: str
    """``workspace`` (the files are as the attempt left them), ``digest`` (rebuilt from its review; ``digest-cut``
    when a file was cut to fit it) or ``workspace-unverified`` (a review from before digests: the folder as it is
    now, which may not be what was judged)."""

    @property
    def decision(self) -> str:
        return "error" if self.outcome.error else "person" if self.outcome.undecided else \
            "pass" if self.outcome.passed else "fail"

    @property
    def changed(self) -> bool:
        return self.outcome.error is None and (self.outcome.undecided is not None
                                               or self.outcome.passed != self.was_passed)


class RejudgeBackend:
    """A :class:`~polpo.checks.base.ReviewBackend` that reads the task's stored yardstick and stores nothing."""

    def __init__(self, llm: ChatClient, judges: Sequence[ModelSettings], options: PanelOptions, timeout: float,
                 dims: Mapping[int, tuple[str, Any]]) -> None:
        self._llm, self._judges, self._options, self._timeout, self._dims = llm, judges, options, timeout, dims
        self.traces: list[ReviewerTrace] = []

    @property
    def llm(self) -> ChatClient:
        return self._llm

    @property
    def judges(self) -> Sequence[ModelSettings]:
        return self._judges

    @property
    def reviewer_timeout(self) -> float:
        return self._timeout

    @property
    def options(self) -> PanelOptions:
        return self._options

    def cached(self, seat: int) -> ChatClient | None:
        return None

    async def dimensions(self, check_idx: int, choose: Callable[[], Awaitable[Chosen]]) -> Chosen:
        stored = self._dims.get(check_idx)
        if stored is not None:
            return dims_from_json(stored[1]), stored[0], None
        return await choose()

    async def previous_review(self, check_idx: int, attempt: int) -> Mapping[str, Any] | None:
        return None  # a rejudged attempt is judged on its own

    def keep_traces(self, check_idx: int, traces: Sequence[ReviewerTrace], *, failed: bool = False) -> None:
        self.traces.extend(traces)


def same_work(workspace: Path, digest: Mapping[str, Any]) -> bool:
    """Whether the workspace still holds every file the digest recorded, as recorded (a cut file: its start)."""
    files = digest.get("files") or {}
    for name, text in files.items():
        read = read_text_bounded(workspace, name, len(str(text)) + 1)  # confined, as the review read it
        if read is None:
            return False
        now = read[0]
        kept = str(text).removesuffix("\n[… cut]")
        if not now.startswith(kept) or (len(now) != len(kept) and not str(text).endswith("[… cut]")):
            return False
    return True


async def rejudge_check(task: Task, workspace: Path, row: Mapping[str, Any], backend: RejudgeBackend) -> Rejudged:
    """Run check ``row`` (a :func:`polpo.store.read.reviewed_checks` row) of ``task`` again under ``backend``."""
    exps = task.spec.all_expectations if task.expectations is None else task.expectations
    raw = exps[row["idx"]]
    exp = raw if isinstance(raw, LlmReviewExpectation) else LlmReviewExpectation.model_validate(raw)
    stored = row.get("scores") or {}
    digest = (stored.get("review") or {}).get("work") or {}
    prior = tuple(CheckOutcome(type=p["type"], label=p["label"], passed=bool(p["passed"]), message=p["message"],
                               details=p["details"], index=p["idx"]) for p in row.get("prior") or [])
    with tempfile.TemporaryDirectory(prefix="polpo-rejudge-") as tmp:
        source = "workspace" if digest else "workspace-unverified"  # no digest: as the folder is now
        files = list((digest.get("files") or {}).keys()) or list(row.get("files") or [])
        where = workspace
        if digest and not same_work(workspace, digest):
            source, where = "digest", Path(tmp)
            for name, text in (digest.get("files") or {}).items():
                target = (where / name).resolve()
                if not target.is_relative_to(where.resolve()):
                    continue  # a stored name that would leave the folder is not the work's
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(str(text), encoding="utf-8")
                if str(text).endswith("[… cut]"):
                    source = "digest-cut"  # a file cut to fit the digest: what runs of it is not the work
        ctx = CheckContext(workspace=where, clock=SystemClock(), check_timeout=60.0, task_title=task.title,
                           task_description=task.spec.description, attempt_number=int(row["number"]),
                           files_changed=files, timeline="(a stored attempt, judged again)", index=int(row["idx"]),
                           review=backend, output=str(digest.get("output") or row.get("output") or ""), prior=prior)
        outcome = await LlmReview().run(exp, ctx)
    return Rejudged(task.id, str(row["attempt_id"]), int(row["idx"]), bool(row["passed"]),
                    stored.get("globalScore"), outcome, source)


def rejudgement_row(r: Rejudged, setup: str, now: str) -> tuple[Any, ...]:
    """The ``rejudgements`` row of a result (polpo.store.read.add_rejudgement's order)."""
    return (r.task_id, r.attempt_id, r.check_idx, setup, int(r.outcome.passed), r.decision, r.outcome.global_score,
            int(r.was_passed), r.was_score, r.source, orjson.dumps(r.outcome.row_json() or {}).decode(), now)
