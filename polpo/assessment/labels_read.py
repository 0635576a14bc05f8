"""The labelled set ``polpo calibrate`` reads: one JSON object per line, people's verdicts on work.

``task`` (required) is what the agent was asked; ``title`` defaults to its first line; ``criteria`` defaults to the
task; ``dimensions`` are written as in an ``llm_review`` (the defaults otherwise — never generated, so every item
is measured on the same yardstick), as are ``reference``, ``examples`` and ``checklist``; ``test`` is the task's
own test command, run in a copy of the work like a ``test`` check; the work is either ``output`` (a text,
reviewed as the agent's output) or ``workspace`` (a folder relative to the labels file, explored with the
reviewers' tools like an agent's files); the person's verdict is ``score`` (1..5) or ``verdict`` (``pass`` →
5, ``fail`` → 1). Other keys are for people (``polpo labels export`` writes some). Blank lines and lines starting
with ``#`` are skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from polpo.checks.expectations import ChecklistItem, Dimension, ReferenceFile, ReviewExample
from polpo.checks.review_inputs import checklist_dims, questions, read_examples, read_reference
from polpo.review.context import Question
from polpo.review.dimensions import DEFAULT_DIMENSIONS, Dim, from_given
from polpo.review.keys import dim_key

__all__ = ["MAX_FILES", "LabelledItem", "read_labels"]

MAX_FILES = 200
_DIMS: TypeAdapter[list[Dimension]] = TypeAdapter(list[Dimension])
_CHECKLIST: TypeAdapter[list[ChecklistItem]] = TypeAdapter(list[ChecklistItem])
_REF: TypeAdapter[str | ReferenceFile] = TypeAdapter(str | ReferenceFile)
_EXAMPLES: TypeAdapter[list[ReviewExample] | str] = TypeAdapter(list[ReviewExample] | str)
VERDICTS = {"pass": 5.0, "fail": 1.0}


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
    reference: str = ""
    anchors: list[dict[str, Any]] = field(default_factory=list)
    checklist: tuple[Question, ...] = ()
    test: str | None = None


def _item(n: int, data: Any, base: Path) -> LabelledItem:
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    task = data.get("task")
    if not isinstance(task, str) or not task.strip():
        raise ValueError('"task" (what the agent was asked) is required')
    score = data.get("score", VERDICTS.get(str(data.get("verdict")).lower()) if "verdict" in data else None)
    if isinstance(score, bool) or not isinstance(score, int | float) or not 1 <= score <= 5:
        raise ValueError('the person\'s verdict is "score" (a number from 1 to 5) or "verdict" ("pass" or "fail")')
    output, folder = data.get("output"), data.get("workspace")
    if (output is None) == (folder is None):
        raise ValueError('give exactly one of "output" (a text) or "workspace" (a folder)')
    workspace = None
    if folder is not None:
        workspace = (base / str(folder)).resolve()
        if not workspace.is_dir():
            raise ValueError(f"workspace {folder!r} is not a folder (relative to the labels file)")
    try:
        given = _DIMS.validate_python(data["dimensions"]) if data.get("dimensions") else None
        qs = questions(_CHECKLIST.validate_python(
            [{"question": q} if isinstance(q, str) else q for q in data["checklist"]])) if data.get("checklist") else ()
        examples = _EXAMPLES.validate_python(data["examples"]) if data.get("examples") else None
    except ValidationError as e:
        first = e.errors()[0]
        raise ValueError(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
    dims = from_given(given) if given else checklist_dims(qs) if qs else list(DEFAULT_DIMENSIONS)
    if qs and given and (stray := {q.dimension for q in qs if dim_key(q.dimension) not in {d.key for d in dims}}):
        raise ValueError(f"checklist: no dimension named {', '.join(sorted(stray))}")
    where = workspace or base
    anchors, note = read_examples(examples, where)
    if note:
        raise ValueError(f"examples: {note}")
    reference = data.get("reference")
    ref = _REF.validate_python(reference) if reference is not None else None
    title = str(data.get("title") or task.strip().splitlines()[0][:60])
    test = data.get("test")
    return LabelledItem(id=str(data.get("id") or f"line {n}"), title=title, task=task.strip(),
                        criteria=str(data.get("criteria") or task).strip(), dims=dims, human=float(score),
                        output=str(output) if output is not None else None, workspace=workspace,
                        reference=read_reference(ref, where), anchors=anchors, checklist=qs,
                        test=str(test) if isinstance(test, str) and test.strip() else None)


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
    seen: dict[str, int] = {}
    for item in items:
        seen[item.id] = seen.get(item.id, 0) + 1
    problems += [f"{path}: the id {ident!r} names {n} items: ids must be unique (--resume matches items by id)"
                 for ident, n in seen.items() if n > 1]
    if problems:
        raise ValueError("\n".join(problems))
    if not items:
        raise ValueError(f"{path}: no labelled items")
    return items


