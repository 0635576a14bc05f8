"""``polpo calibrate`` on slow models: a progress line per item, and results kept as each item finishes.

On a small local model one item can take minutes, so a run of a few items is a long wait. Each finished item
is printed (with the rate so far and an estimate of the time left) and appended to a results file, one JSON line
per item, so a stopped run keeps what it had and ``--resume`` runs only the items still missing (items are matched
by their ``id``). A result is reused only for the same judge set-up (another panel is another measurement, and
writes to a file of its own: :func:`setup_key`) and only when it was scored (a failed item is tried again). A run
that does not resume keeps the earlier run's file beside its own (``.<when>.prev``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from polpo.assessment.calibrate import ItemResult
from polpo.llm.client import ModelSettings

__all__ = ["ResultsFile", "progress_line", "setup_key"]


def _duration(seconds: float) -> str:
    s = max(0, round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def progress_line(done: int, total: int, result: ItemResult, elapsed: float, ran: int) -> str:
    """``[3/8] item-id: panel 3.50 (human 4); 41.0 s per item, about 3m25s left``. Pure.

    ``ran``: items scored in this run (resumed ones cost nothing, so they do not count in the rate)."""
    what = (f"panel {result.panel:.2f} (human {result.human:g})" if result.panel is not None
            else f"not scored: {(result.error or 'no result')[:200]}")
    if result.evidence:
        what += f"; evidence: {result.evidence}"
    line = f"[{done}/{total}] {result.id}: {what}"
    if ran > 0:
        rate = elapsed / ran
        line += f"; {rate:.1f} s per item, about {_duration(rate * (total - done))} left"
    return line


class ResultsFile:
    """The JSON-lines file a run appends each finished item to (with the judge set-up that scored it)."""

    def __init__(self, path: Path, judges: Sequence[str] | str) -> None:
        self.path = path
        self.judges = judges if isinstance(judges, str) else list(judges)

    def previous(self) -> dict[str, ItemResult]:
        """Scored items of an earlier run by the same judges (the last line of an item wins)."""
        out: dict[str, ItemResult] = {}
        if not self.path.is_file():
            return out
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                data = json.loads(line)
                if data.get("judges") != self.judges or data.get("panel") is None:
                    continue
                out[str(data["id"])] = ItemResult.from_json(data)
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # a line cut by a stopped run, or not ours: that item runs again
        return out

    def start(self, keep: Mapping[str, ItemResult]) -> Path | None:
        """A fresh file holding only what is kept (a run without --resume starts from nothing). An earlier run's
        file is kept beside it (``.prev``), never lost; its path is returned."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        kept = None
        if not keep and self.path.is_file() and self.path.stat().st_size:
            stamp = datetime.fromtimestamp(self.path.stat().st_mtime, UTC).strftime("%Y%m%dT%H%M%S")
            kept = self.path.with_name(f"{self.path.name}.{stamp}.prev")  # each earlier run kept, none overwritten
            self.path.replace(kept)
        self.path.write_text("".join(self._line(r) for r in keep.values()), encoding="utf-8")
        return kept

    def append(self, result: ItemResult) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(self._line(result))
            f.flush()

    def _line(self, r: ItemResult) -> str:
        return json.dumps({**r.to_json(), "judges": self.judges}) + "\n"


def setup_key(judges: Sequence[ModelSettings], options: Any) -> str:
    """A short name for a judge set-up (its models, sampling and panel rules): results of another set-up are
    another measurement, so they go to another file and are never reused for this one. Where a model is served
    is not part of it: a local server started again on another port serves the same judge, and ``--resume``
    must go on with its results."""
    body = json.dumps({"judges": [[j.model, j.temperature, j.max_tokens, j.context_window, j.seed]
                                  for j in judges],
                       "diversity": getattr(options, "diversity", None), "logprobs": getattr(options, "logprobs", None),
                       "maxTurns": getattr(options, "max_turns", None),
                       "reviewerError": getattr(options, "reviewer_error", None)}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:10]
