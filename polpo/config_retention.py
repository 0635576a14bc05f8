"""``[retention]``: what a daemon that runs for months keeps of its finished work (docs/how-to/retention.md)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from polpo.durations import Duration

__all__ = ["RetentionSettings"]


def _keep_for(v: object) -> object:
    """``"forever"``: never removed (None); else a duration."""
    if v == 0 or v == "0":
        raise ValueError('a duration greater than zero, or "forever" to keep them all')
    return None if v == "forever" else v


class RetentionSettings(BaseModel):
    """What a daemon that runs for months keeps of its finished work (docs/how-to/retention.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    # a finished mission with its tasks, attempts, assessments, reviews, transcripts, events and workspace in the
    # state folder, this long after it finished; "forever": never removed
    finished: Annotated[Duration | None, BeforeValidator(_keep_for)] = Field(default_factory=lambda: timedelta(days=90))
    schedule_runs: int | None = Field(None, ge=1)  # per scheduled file: its newest N runs are kept, older ones go
    keep_labelled: bool = True  # a mission a person gave a verdict on (polpo override) is kept: a calibration label
    finished_files: Literal["done", "keep"] = "done"  # a finished mission's file: moved to done/ beside it, or left
    export: Path | None = None  # JSON lines: every row of each mission removed, appended (and synced) before
    interval: Duration = Field(default_factory=lambda: timedelta(seconds=600))  # between two passes (one at start-up)
    batch: int = Field(20, ge=1, le=1000)  # missions removed per transaction
