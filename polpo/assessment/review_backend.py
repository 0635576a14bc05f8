"""The daemon's side of ``llm_review`` checks: judges from the config, the stored yardstick, the stored traces.

The check (:mod:`polpo.checks.llm_review`) and the panel (:mod:`polpo.review`) know nothing of the store. For
one assessment this backend gives them the judges' model settings, the task's dimension set (chosen the first
time, stored, and reused on every fix and retry so each attempt is measured with the same yardstick), and keeps
every reviewer's whole trace.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import orjson

from polpo.checks.base import Chosen
from polpo.clock import Clock, iso
from polpo.config import Config
from polpo.llm.client import ChatClient, LLMClient, ModelSettings
from polpo.llm.secrets import redact
from polpo.model.spend import ReviewSpend, SpendRows
from polpo.review.calibration import Calibration, load_calibration
from polpo.review.dimensions import dims_from_json, dims_to_json
from polpo.review.panel import PanelOptions
from polpo.review.reviewer import ReviewerTrace
from polpo.store.protocol import Store

__all__ = ["AssessmentReviews", "judge_settings", "panel_options"]

CacheFor = Callable[[int], ChatClient | None]


def judge_settings(cfg: Config) -> list[ModelSettings]:
    """One ModelSettings per seat (``[judge] seats``), or [] when no judge is configured."""
    j = cfg.judge
    return [ModelSettings(model=m, api_base=j.api_base, api_key_env=j.api_key_env, temperature=j.temperature,
                          max_tokens=j.max_tokens, context_window=j.context_window,
                          timeout=cfg.llm.request_timeout.total_seconds()) for m in j.panel_models()]


def panel_options(cfg: Config) -> PanelOptions:
    """The config's panel rules; the calibration file is read here (the config load checked it already)."""
    j = cfg.judge
    cal: Calibration | None = load_calibration(j.calibration) if j.calibration is not None else None
    return PanelOptions(reviewer_error=j.reviewer_error, uncertain_band=j.uncertain_band, calibration=cal,
                        max_turns=j.max_turns, diversity=j.diversity, logprobs=j.logprobs,
                        probes=j.probes)


class AssessmentReviews:
    """A :class:`~polpo.checks.base.ReviewBackend` for one assessment of one task."""

    def __init__(self, cfg: Config, store: Store, clock: Clock, llm: LLMClient, *, task_id: str,
                 assessment_id: str, options: PanelOptions | None = None, cache: CacheFor | None = None,
                 spent: SpendRows | None = None) -> None:
        self.store = store
        self.spent = spent  # the mission's spend rows, kept with the rows written
        self.clock = clock
        self._llm = llm
        self._judges = judge_settings(cfg)
        self._timeout = cfg.judge.reviewer_timeout.total_seconds()
        self._options = options if options is not None else panel_options(cfg)
        self._cache = cache
        self.task_id = task_id
        self.assessment_id = assessment_id

    @property
    def llm(self) -> ChatClient:
        return self._llm

    @property
    def options(self) -> PanelOptions:
        return self._options

    def cached(self, seat: int) -> ChatClient | None:
        return self._cache(seat) if self._cache is not None else None

    @property
    def judges(self) -> Sequence[ModelSettings]:
        return self._judges

    @property
    def reviewer_timeout(self) -> float:
        return self._timeout

    async def dimensions(self, check_idx: int, choose: Callable[[], Awaitable[Chosen]]) -> Chosen:
        stored = await self.store.task_dimensions(self.task_id, check_idx)
        if stored is not None:
            return dims_from_json(stored[1]), stored[0], None
        dims, source, note = await choose()
        await self.store.commit(self.store.tx().dimensions(self.task_id, check_idx, source,
                                                           orjson.dumps(dims_to_json(dims)).decode(),
                                                           self.clock.now()))
        return dims, source, note

    async def previous_review(self, check_idx: int, attempt: int) -> Mapping[str, Any] | None:
        check = await self.store.last_check(f"{self.task_id}/{attempt}", check_idx)
        return check.review if check is not None else None

    def keep_traces(self, check_idx: int, traces: Sequence[ReviewerTrace], *, failed: bool = False) -> None:
        now = self.clock.now()
        tx = self.store.tx()
        key = f"{self.assessment_id}/error" if failed else self.assessment_id  # the latest failed try, apart
        for trace in traces:
            tx.review(key, check_idx, trace.index, self.task_id, trace.model, trace.ok,
                      redact(orjson.dumps(trace.to_json()).decode()), now, tokens_in=trace.tokens_in,
                      tokens_out=trace.tokens_out, cost=trace.cost)
            if self.spent is not None:
                self.spent.reviews[(key, check_idx, trace.index)] = ReviewSpend(
                    self.task_id, "reviewer", trace.model, trace.tokens_in, trace.tokens_out, trace.cost, iso(now))
        self.store.submit(tx)
