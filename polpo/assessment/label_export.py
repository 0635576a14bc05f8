"""People's verdicts on real work as a labels file: one line per task a person overrode or reviewed when the judge
could not tell (:mod:`polpo.engine.person_review`; ``judgeVerdict`` null), in the format
``polpo calibrate --labels`` reads (:mod:`polpo.assessment.calibrate`), so the judge's agreement with people is
measured on the tasks they corrected, and ``polpo calibrate`` can refit ``[judge] calibration`` from them.

Each line names the task (``task``: its description), the ``criteria`` and ``dimensions`` of its first
``llm_review`` (as given or as generated for it), the ``workspace`` the work is in (relative to the labels file)
and the person's ``score``; beside them, read by people and ignored by calibrate: the verdicts, the reason, who
gave it, the judge's global and per-dimension scores and the judge models that reviewed it. Pure: rows in, lines
out.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polpo.checks.review_inputs import folder_text

__all__ = ["label_lines"]


def _review(spec: dict[str, Any], idx: int) -> dict[str, Any] | None:
    tasks = spec.get("tasks") or []
    task = tasks[idx] if 0 <= idx < len(tasks) else {}
    checks = list(task.get("expectations") or []) + [e for t in task.get("tiers") or []
                                                     for e in t.get("expectations") or []]
    return next((e for e in checks if isinstance(e, dict) and e.get("type") == "llm_review"), None)


def label_lines(rows: Sequence[dict[str, Any]], labels_dir: Path) -> list[dict[str, Any]]:
    """The label of each override row (``polpo.store.read.overrides_for_labels``)."""
    out = []
    for r in rows:
        spec = json.loads(r["spec"]) if isinstance(r["spec"], str) else r["spec"]
        tasks = spec.get("tasks") or []
        task = tasks[r["idx"]] if 0 <= r["idx"] < len(tasks) else {}
        review = _review(spec, r["idx"]) or {}
        dims = review.get("dimensions") or next((d["dimensions"] for d in r.get("dimensions") or []), None)
        line: dict[str, Any] = {
            "id": r["task_id"], "title": r["title"], "task": task.get("description") or r["title"],
            "criteria": review.get("criteria") or task.get("description") or r["title"],
            "workspace": os.path.relpath(r["workspace"], labels_dir.resolve()), "score": r["score"],
            "workText": folder_text(Path(r["workspace"])),
        }
        if dims:
            line["dimensions"] = [{k: d[k] for k in ("name", "description", "weight", "rubric") if d.get(k) is not None}
                                  for d in dims]
        line.update({"verdict": "pass" if r["passed"] else "fail",
                     "judgeVerdict": None if r["judge_passed"] is None else "pass" if r["judge_passed"] else "fail",
                     "judgeScore": r["judge_score"], "judgeScores": r.get("judge_scores"),
                     "judgeModels": r.get("judge_models") or [], "reason": r["reason"], "by": r["by_person"],
                     "at": r["created_at"]})
        out.append(line)
    return out
