"""``polpo calibrate``: run the review panel on a set labelled by people and measure how well it agrees.

A labels file has one JSON object per line::

    {"id": "typed", "task": "Write reverse(s)…", "criteria": "…", "dimensions": [...], "output": "def …", "score": 5}

``task`` (required) is what the agent was asked; ``title`` defaults to its first line; ``criteria`` defaults to the
task; ``dimensions`` are written as in an ``llm_review`` (the defaults otherwise — never generated, so every item
is measured on the same yardstick); the work is either ``output`` (a text, reviewed as the agent's output) or
``workspace`` (a folder relative to the labels file, explored with the read-only tools like an agent's files);
``score`` is the human score on the 1..5 scale. Blank lines and lines starting with ``#`` are skipped.

The panel runs with the config's judges, one item at a time, uncalibrated (raw scores are what a calibration is
fitted to). The report (:func:`report`) gives, for the panel and for each reviewer alone: Spearman's ρ,
quadratic-weighted Cohen's κ (:mod:`polpo.review.calibration`) and the mean bias; the panel against the single
reviewers; and the least-squares line ``human ≈ scale · panel + bias`` that ``--write`` saves for
``[judge] calibration``.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from polpo.checks.llm_review import Dimension
from polpo.llm.client import ChatClient, ModelSettings
from polpo.review.calibration import linear_fit, mean_bias, spearman, weighted_kappa
from polpo.review.dimensions import DEFAULT_DIMENSIONS, Dim, from_given
from polpo.review.panel import PanelOptions, run_panel
from polpo.review.reviewer import DEFAULT_MAX_TURNS, ReviewContext

__all__ = ["Agreement", "ItemResult", "LabelledItem", "agreement", "read_labels", "render", "report",
           "run_calibration"]

MAX_FILES = 200
_DIMS: TypeAdapter[list[Dimension]] = TypeAdapter(list[Dimension])


@dataclass(frozen=True)
class LabelledItem:
    id: str
    title: str
    task: str
    criteria: str
    dims: list[Dim]
    human: float
    output: str | None = None
    workspace: Path | None = None


def _item(n: int, data: Any, base: Path) -> LabelledItem:
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    task = data.get("task")
    if not isinstance(task, str) or not task.strip():
        raise ValueError('"task" (what the agent was asked) is required')
    score = data.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float) or not 1 <= score <= 5:
        raise ValueError('"score" (the human score) must be a number from 1 to 5')
    output, folder = data.get("output"), data.get("workspace")
    if (output is None) == (folder is None):
        raise ValueError('give exactly one of "output" (a text) or "workspace" (a folder)')
    workspace = None
    if folder is not None:
        workspace = (base / str(folder)).resolve()
        if not workspace.is_dir():
            raise ValueError(f"workspace {folder!r} is not a folder (relative to the labels file)")
    try:
        dims = from_given(_DIMS.validate_python(data["dimensions"])) if data.get("dimensions") else \
            list(DEFAULT_DIMENSIONS)
    except ValidationError as e:
        raise ValueError(f"dimensions: {e.errors()[0]['msg']}") from None
    title = str(data.get("title") or task.strip().splitlines()[0][:60])
    return LabelledItem(id=str(data.get("id") or f"line {n}"), title=title, task=task.strip(),
                        criteria=str(data.get("criteria") or task).strip(), dims=dims, human=float(score),
                        output=str(output) if output is not None else None, workspace=workspace)


def read_labels(path: Path) -> list[LabelledItem]:
    """The labelled items of a file; ValueError naming every bad line."""
    items: list[LabelledItem] = []
    problems: list[str] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            items.append(_item(n, json.loads(line), path.parent))
        except ValueError as e:  # json.JSONDecodeError is one
            problems.append(f"{path}:{n}: {e}")
    if problems:
        raise ValueError("\n".join(problems))
    if not items:
        raise ValueError(f"{path}: no labelled items")
    return items


@dataclass
class ItemResult:
    id: str
    human: float
    panel: float | None
    seats: dict[int, float] = field(default_factory=dict)
    """Each reviewer's own weighted score (seat → score), for the per-reviewer agreement."""
    error: str | None = None


def _files(root: Path) -> list[str]:
    found = sorted(str(p.relative_to(root)) for p in root.rglob("*")
                   if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))
    return found[:MAX_FILES]


async def run_calibration(items: Sequence[LabelledItem], llm: ChatClient, judges: Sequence[ModelSettings], *,
                          reviewer_error: str = "abstain", reviewer_timeout: float | None = None,
                          max_turns: int = DEFAULT_MAX_TURNS, done: Mapping[str, ItemResult] | None = None,
                          on_item: Callable[[ItemResult, bool], None] | None = None) -> list[ItemResult]:
    """The panel's raw score and each reviewer's, per item (one item at a time; its reviewers in parallel).

    ``done``: results of an earlier run, by item id, reused instead of run again; ``on_item(result, reused)`` is
    called as each item finishes (progress, and results kept as they come)."""
    options = PanelOptions(reviewer_error="fail" if reviewer_error == "fail" else "abstain", max_turns=max_turns)
    out: list[ItemResult] = []
    with tempfile.TemporaryDirectory(prefix="polpo-calibrate-") as empty:
        for item in items:
            if done is not None and item.id in done:
                out.append(done[item.id])
                if on_item is not None:
                    on_item(done[item.id], True)
                continue
            if item.workspace is not None:
                ctx = ReviewContext(title=item.title, description=item.task, criteria=item.criteria,
                                    workspace=item.workspace, files_changed=_files(item.workspace),
                                    timeline="(a labelled workspace: explore its files)")
            else:
                ctx = ReviewContext(title=item.title, description=item.task, criteria=item.criteria,
                                    workspace=Path(empty), files_changed=[],
                                    timeline=f"Agent output:\n{item.output}")
            result = await run_panel(llm, judges, ctx, item.dims, 3.0, options=options,
                                     reviewer_timeout=reviewer_timeout)
            seats = {t.index % len(judges): t.global_score for t in result.reviewers
                     if t.ok and t.global_score is not None}
            out.append(ItemResult(item.id, item.human, result.global_score, seats, result.error))
            if on_item is not None:
                on_item(out[-1], False)
    return out


@dataclass(frozen=True)
class Agreement:
    n: int
    spearman: float | None
    kappa: float | None
    bias: float | None

    def to_json(self) -> dict[str, Any]:
        r = _round
        return {"n": self.n, "spearman": r(self.spearman), "kappa": r(self.kappa), "bias": r(self.bias)}


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 6)


def agreement(pred: Sequence[float], human: Sequence[float]) -> Agreement:
    return Agreement(len(pred), spearman(pred, human), weighted_kappa(pred, human), mean_bias(pred, human))


def report(results: Sequence[ItemResult]) -> dict[str, Any]:
    """Agreement of the panel and of each reviewer with people, the comparison, and the linear calibration."""
    scored = [r for r in results if r.panel is not None]
    panel = agreement([r.panel for r in scored if r.panel is not None], [r.human for r in scored])
    seats = sorted({s for r in scored for s in r.seats})
    reviewers = {s: agreement([r.seats[s] for r in scored if s in r.seats],
                              [r.human for r in scored if s in r.seats]) for s in seats}
    kappas = [a.kappa for a in reviewers.values() if a.kappa is not None]
    rhos = [a.spearman for a in reviewers.values() if a.spearman is not None]
    fit = linear_fit([r.panel for r in scored if r.panel is not None], [r.human for r in scored])
    return {
        "items": len(results), "scored": len(scored),
        "failed": [{"id": r.id, "error": r.error} for r in results if r.panel is None],
        "panel": panel.to_json(), "reviewers": {str(s): a.to_json() for s, a in reviewers.items()},
        "single": {"meanKappa": _round(statistics.fmean(kappas)) if kappas else None,
                   "bestKappa": _round(max(kappas)) if kappas else None,
                   "meanSpearman": _round(statistics.fmean(rhos)) if rhos else None,
                   "bestSpearman": _round(max(rhos)) if rhos else None},
        "calibration": {"scale": _round(fit[0]), "bias": _round(fit[1])} if fit else None,
        "results": [{"id": r.id, "human": r.human, "panel": r.panel,
                     "reviewers": {str(k): v for k, v in sorted(r.seats.items())}} for r in results],
    }


def no_fit_reason(rep: Mapping[str, Any]) -> str:
    """Why a report has no linear calibration, in words (the real reason, not a guess)."""
    if rep["scored"] == 0:
        first = rep["failed"][0]["error"] if rep["failed"] else "no item"
        return f"no item could be scored; the first error: {first}"
    if rep["scored"] < 2:
        return "only one item was scored: a line needs two"
    return "the panel gave every item the same score"


def _fmt(v: float | None, signed: bool = False) -> str:
    return "n/a" if v is None else (f"{v:+.3f}" if signed else f"{v:.3f}")


def render(rep: dict[str, Any], *, source: str, judges: Sequence[str]) -> str:
    lines = [f"calibration: {rep['scored']}/{rep['items']} labelled item(s) of {source} scored by "
             f"{len(judges)} reviewer(s) ({', '.join(judges)})",
             f"{'':<12} {'n':>3} {'spearman':>9} {'kappa(qw)':>10} {'bias':>7}"]

    def row(name: str, a: dict[str, Any]) -> str:
        return (f"{name:<12} {a['n']:>3} {_fmt(a['spearman']):>9} {_fmt(a['kappa']):>10} "
                f"{_fmt(a['bias'], True):>7}")
    lines.append(row("panel", rep["panel"]))
    for seat, a in rep["reviewers"].items():
        lines.append(row(f"reviewer {seat}", a))
    single = rep["single"]
    lines.append(f"panel vs a single reviewer: kappa {_fmt(rep['panel']['kappa'])} vs {_fmt(single['meanKappa'])} "
                 f"mean ({_fmt(single['bestKappa'])} best); spearman {_fmt(rep['panel']['spearman'])} vs "
                 f"{_fmt(single['meanSpearman'])} mean ({_fmt(single['bestSpearman'])} best)")
    cal = rep["calibration"]
    lines.append("linear calibration: " + (f"human ≈ {cal['scale']:.4g} · panel {cal['bias']:+.4g}"
                                           if cal else f"n/a ({no_fit_reason(rep)})"))
    for f in rep["failed"]:
        lines.append(f"not scored: {f['id']}: {f['error']}")
    return "\n".join(lines)
