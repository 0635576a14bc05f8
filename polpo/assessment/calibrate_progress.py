"""``polpo calibrate`` on slow models: a progress line per item, and results kept as each item finishes.

On a small local model one item can take minutes, so a run of a few items is a long wait. Each finished item
is printed (with the rate so far and an estimate of the time left) and appended to a results file, one JSON line
per item, so a stopped run keeps what it had and ``--resume`` runs only the items still missing. A result is
reused only for the same judge models (another panel is another measurement) and only when it was scored (a
failed item is tried again).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from polpo.assessment.calibrate import ItemResult

__all__ = ["ResultsFile", "progress_line"]


def _duration(seconds: float) -> str:
    s = max(0, round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def progress_line(done: int, total: int, result: ItemResult, elapsed: float, ran: int) -> str:
    """``[3/8] item-id: panel 3.50 (human 4); 41.0 s per item, about 3m25s left``. Pure.

    ``ran``: items scored in this run (resumed ones cost nothing, so they do not count in the rate)."""
    what = (f"panel {result.panel:.2f} (human {result.human:g})" if result.panel is not None
            else f"not scored: {(result.error or 'no result')[:200]}")
    line = f"[{done}/{total}] {result.id}: {what}"
    if ran > 0:
        rate = elapsed / ran
        line += f"; {rate:.1f} s per item, about {_duration(rate * (total - done))} left"
    return line


class ResultsFile:
    """The JSON-lines file a run appends each finished item to (with the judges that scored it)."""

    def __init__(self, path: Path, judges: Sequence[str]) -> None:
        self.path = path
        self.judges = list(judges)

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
                out[str(data["id"])] = ItemResult(
                    str(data["id"]), float(data["human"]), float(data["panel"]),
                    {int(k): float(v) for k, v in (data.get("reviewers") or {}).items()})
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # a line cut by a stopped run, or not ours: that item runs again
        return out

    def start(self, keep: Mapping[str, ItemResult]) -> None:
        """A fresh file holding only what is kept (a run without --resume starts from nothing)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("".join(self._line(r) for r in keep.values()), encoding="utf-8")

    def append(self, result: ItemResult) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(self._line(result))
            f.flush()

    def _line(self, r: ItemResult) -> str:
        return json.dumps({"id": r.id, "human": r.human, "panel": r.panel,
                           "reviewers": {str(k): v for k, v in sorted(r.seats.items())}, "error": r.error,
                           "judges": self.judges}) + "\n"
