"""What a task's author gives the judge besides the rubric, made ready for the reviewers: a reference to compare
with, scored examples (anchors), a checklist. Reading files happens here, at the edge; the panel gets text.

* ``reference``: inline text (the agent never sees it), or ``{"file": path}`` relative to the workspace, cut at
  :data:`REFERENCE_CHARS`.
* ``examples``: a list of ``{output | file, score, why, task?}``, or the path of a labels file — one JSON object
  per line, as ``polpo labels export`` writes and ``polpo calibrate`` reads (``task``, ``output`` or
  ``workspace``, ``score``): each line's work is its ``output``, or the text files of its ``workspace`` folder
  (relative to the labels file), cut at :data:`EXAMPLE_CHARS`.
* ``checklist``: questions, each scoring a dimension; with no ``dimensions`` given, the dimensions are the ones
  the questions name (``checklist`` by default), weighted by their questions' weights.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from polpo.checks.expectations import relative_path_problem
from polpo.review.context import Question
from polpo.review.dimensions import Dim, dim_key
from polpo.review.scratch import LINKED, SKIPPED
from polpo.tools.bounded_read import read_text_bounded

__all__ = ["EXAMPLE_CHARS", "MAX_EXAMPLES", "REFERENCE_CHARS", "checklist_dims", "folder_text", "questions", "read_examples",
           "read_reference"]

REFERENCE_CHARS = 12_000
EXAMPLE_CHARS = 1_500
MAX_EXAMPLES = 12
WORKSPACE_FILES = 20


LABELS_BYTES = 4 * 1024 * 1024


def read_reference(reference: Any, workspace: Path) -> str:
    """The reference's text ("" when there is none); a file that cannot be read says so in its place. A file is
    read confined to the workspace (:func:`~polpo.tools.bounded_read.read_text_bounded`): inline text is how a
    reference stays out of the agent's sight."""
    if reference is None:
        return ""
    if isinstance(reference, str):
        return reference[:REFERENCE_CHARS]
    name = str(getattr(reference, "file", None) or (reference.get("file") if isinstance(reference, Mapping) else ""))
    read = read_text_bounded(workspace, name, REFERENCE_CHARS)
    if read is None:
        return f"(the reference file {name} could not be read: it is not a text file in the workspace)"
    return read[0]


def folder_text(folder: Path) -> str:
    """The text files of a labelled work's folder, as much as an anchor shows (:data:`EXAMPLE_CHARS`): hidden
    and dependency folders aside (a ``node_modules`` sorts before ``src``, and is not the work)."""
    parts: list[str] = []
    left = EXAMPLE_CHARS
    for path in _work_files(folder)[:WORKSPACE_FILES]:
        if left <= 0:
            break
        read = read_text_bounded(folder, str(path.relative_to(folder)), left)
        if read is None:
            continue
        block = f"--- {path.relative_to(folder)}\n{read[0]}"
        parts.append(block)
        left -= len(block)
    return "\n".join(parts)


def _work_files(folder: Path) -> list[Path]:
    found: list[Path] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in LINKED | SKIPPED)
        found += [Path(root) / f for f in sorted(files) if not f.startswith(".")]
        if len(found) >= WORKSPACE_FILES:
            break
    return found


def _label_lines(base: Path, name: str) -> list[dict[str, Any]] | None:
    """The scored lines of a labels file (``name`` in ``base``, confined to it); None when it cannot be read."""
    read = read_text_bounded(base, name, LABELS_BYTES)
    if read is None:
        return None
    folder = (base / name).parent
    out = []
    for line in read[0].splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        score = data.get("score") if isinstance(data, dict) else None
        if not isinstance(score, int | float) or isinstance(score, bool) or not 1 <= score <= 5:
            continue
        work = data.get("output") or data.get("workText")  # an exported label carries its work's text
        place = data.get("workspace")
        if work is None and isinstance(place, str) and not relative_path_problem(place):
            work = folder_text(folder / place)  # a folder beside the labels file, never one outside it
        if work is None:
            continue
        out.append({"output": str(work)[:EXAMPLE_CHARS], "score": float(score), "why": str(data.get("reason") or ""),
                    "task": str(data.get("task") or data.get("title") or "")[:300] or None})
    return out


def read_examples(examples: Any, workspace: Path) -> tuple[list[dict[str, Any]], str | None]:
    """The anchors (at most :data:`MAX_EXAMPLES`) and a note when some could not be read."""
    if not examples:
        return [], None
    if isinstance(examples, str):
        lines = _label_lines(workspace, examples)
        if lines is None:
            return [], f"the examples file {examples} could not be read: it is not a text file in the workspace"
        return lines[:MAX_EXAMPLES], None
    out: list[dict[str, Any]] = []
    note = None
    for e in examples[:MAX_EXAMPLES]:
        text = e.output
        if text is None and e.file is not None:
            read = read_text_bounded(workspace, e.file, EXAMPLE_CHARS)
            if read is None:
                note = f"the example file {e.file} could not be read: it is not a text file in the workspace"
                continue
            text = read[0]
        out.append({"output": str(text)[:EXAMPLE_CHARS], "score": e.score, "why": e.why, "task": e.task})
    return out, note


def questions(items: Sequence[Any] | None) -> tuple[Question, ...]:
    """The checklist's questions (``dimension`` None → the default checklist dimension)."""
    return tuple(Question(i.question, i.dimension or "checklist", float(i.weight)) for i in items or ())


def checklist_dims(qs: Sequence[Question]) -> list[Dim]:
    """Dimensions made from a checklist alone: one per dimension its questions name (matched as scores are:
    ``Tests`` and ``tests`` are one, spelled as first written), weighted by them."""
    weights: dict[str, float] = {}
    names: dict[str, str] = {}
    for q in qs:
        key = dim_key(q.dimension)
        names.setdefault(key, q.dimension)
        weights[key] = weights.get(key, 0.0) + q.weight
    total = math.fsum(weights.values())
    return [Dim(names[key], round(w / total, 6), f"scored by its {sum(dim_key(q.dimension) == key for q in qs)} "
                "checklist question(s)") for key, w in weights.items()]
