"""The expectation judge: when a task fails, is the *expectation* wrong rather than the work?

One LLM call (:func:`judge_expectations`) gives a verdict per failed expectation and may propose a correction;
:func:`plan_corrections` (pure) decides which proposals are applied. It is deliberately conservative, since a
wrong correction turns a failing task into a false pass:

* a proposal targets an expectation by its **index** (Polpo corrected the first expectation of the same type,
  which is wrong with several expectations of one type); a proposal with only a ``type`` is accepted when
  exactly one candidate expectation has that type;
* only verdict ``expectation_wrong`` with a ``fix`` changes anything; ``work_wrong``, ``unsure`` or anything else
  leaves the expectation as it is;
* one field per correction, among those the check type declares correctable (``command`` for test/script,
  ``path`` or ``paths`` for file_exists, ``threshold`` for llm_review); any other field, several fields, or a
  type without corrections → rejected;
* with ``known_files`` (the files the attempt created or changed), a corrected file_exists path must be one of
  them: a file_exists expectation is about something the agent was to produce, and pointing it at any file that
  happens to exist (a README) would be a false pass;
* a threshold can only go down, by at most 1.0 and never below ``floor``
  (default 2.5); a larger drop is clamped to that bound (recorded in ``note``), and an expectation already at
  the bound cannot be relaxed;
* an expectation marked ``"confidence": "firm"`` is never corrected; expectations that did not fail are not
  touched; two proposals for the same expectation are ambiguous and both rejected;
* the corrected expectation must still validate against the mission schema.

The input list is never mutated. Whether the judge runs at all is decided before the call: once per task, on
its first failure (the engine), and never when :func:`skip_reason` says a call could not change the verdict —
a failed expectation marked firm or of a type without corrections (a ``metric``: its correction would be refused
and it would still fail), or clearly bad
work (the review's global score below :data:`CLEARLY_BAD_SCORE`): as in Polpo's assessment rules.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from polpo.checks.registry import CHECKS
from polpo.llm.client import LLMClient, LLMError, ModelSettings
from polpo.llm.secrets import redact
from polpo.review import prompts
from polpo.review.parsing import JSONNotFound, extract_json

__all__ = [
    "CLEARLY_BAD_SCORE",
    "DEFAULT_FLOOR",
    "Correction",
    "CorrectionPlan",
    "JudgeResult",
    "Rejected",
    "apply_corrections",
    "judge_expectations",
    "plan_corrections",
    "skip_reason",
]

DEFAULT_FLOOR = 2.5
CLEARLY_BAD_SCORE = 2.5
"""Below this review score the work is clearly bad: the expectations are not what failed, so no judge call."""


def skip_reason(failed: Sequence[Mapping[str, Any]], expectations: Sequence[Mapping[str, Any]],
                global_score: float | None) -> str | None:
    """Why calling the expectation judge could not change the verdict, or None when it could. Pure.

    ``failed``: the failed checks (``index`` into ``expectations``); ``global_score``: the assessment's review
    score, None without a review.
    """
    if global_score is not None and global_score < CLEARLY_BAD_SCORE:
        return (f"the review scored the work {global_score:.2f}/5, below {CLEARLY_BAD_SCORE:g}: the work is "
                "clearly bad, not the expectations")
    for f in failed:
        idx = f.get("index")
        if not isinstance(idx, int) or not 0 <= idx < len(expectations):
            continue
        kind = expectations[idx].get("type")
        if expectations[idx].get("confidence") == "firm":
            return (f"expectation {idx} ({kind}) failed and is marked firm: it cannot "
                    "be corrected, so the task fails whatever the judge says")
        if kind in CHECKS and not CHECKS[str(kind)].correctable:
            return (f"expectation {idx} ({kind}) failed and a {kind} cannot be corrected, so the task fails "
                    "whatever the judge says")
    return None


@dataclass(frozen=True)
class Correction:
    index: int
    type: str
    field: str
    old: Any
    new: Any
    reason: str
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "type": self.type, "field": self.field, "old": self.old, "new": self.new,
                "reason": self.reason, "note": self.note}


@dataclass(frozen=True)
class Rejected:
    proposal: Any
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"proposal": self.proposal, "reason": self.reason}


@dataclass(frozen=True)
class CorrectionPlan:
    expectations: list[dict[str, Any]]
    """A corrected deep copy of the input (equal to it when nothing was applied)."""
    applied: list[Correction]
    rejected: list[Rejected]


def _resolve_index(p: Mapping[str, Any], expectations: Sequence[Mapping[str, Any]],
                   failed: Collection[int] | None) -> int | str:
    """The targeted expectation's index, or the reason it cannot be determined."""
    idx = p.get("index")
    if idx is not None:
        if isinstance(idx, bool) or not isinstance(idx, int):
            if isinstance(idx, str) and idx.strip().isdigit():
                idx = int(idx.strip())
            else:
                return f"index {idx!r} is not an integer"
        if not 0 <= idx < len(expectations):
            return f"index {idx} is out of range (0..{len(expectations) - 1})"
        return idx
    kind = p.get("type")
    pool = [i for i, e in enumerate(expectations) if e.get("type") == kind and (failed is None or i in failed)]
    if not isinstance(kind, str) or not pool:
        return "no index, and no failed expectation of that type"
    if len(pool) > 1:
        return f"no index, and {len(pool)} failed {kind} expectations: ambiguous"
    return pool[0]


def _correct(exp: Mapping[str, Any], fix: Mapping[str, Any], floor: float,
             known_files: Collection[str] | None) -> tuple[dict[str, Any], str, Any, Any, str] | str:
    """``(new_expectation, field, old, new, note)`` or the reason the fix is refused."""
    kind = str(exp.get("type"))
    check = CHECKS.get(kind)
    allowed = check.correctable if check is not None else ()
    if check is None or not allowed:
        return f"{kind} expectations cannot be corrected"
    given = {k: v for k, v in fix.items() if v is not None}
    if len(given) != 1:
        return f"a fix must change exactly one of {', '.join(allowed)}; got {', '.join(sorted(given)) or 'nothing'}"
    (name, value), = given.items()
    if name not in allowed:
        return f"{name!r} cannot be changed on a {kind} expectation (only {', '.join(allowed)})"
    result = check.correct(exp, name, value, floor=floor, known_files=known_files)
    if isinstance(result, str):
        return result
    try:
        check.model.model_validate(result.expectation)
    except ValidationError as exc:
        return f"the corrected expectation is invalid: {exc.errors()[0]['msg']}"
    return result.expectation, name, result.old, result.new, result.note


def plan_corrections(expectations_json: Sequence[Mapping[str, Any]], proposals: object, *,
                     floor: float = DEFAULT_FLOOR, failed: Collection[int] | None = None,
                     known_files: Collection[str] | None = None) -> CorrectionPlan:
    """Which proposed corrections to apply, and the corrected list. Pure; see the module docstring for the rules.

    ``proposals`` is the judge's ``corrections`` list (or the whole ``{"corrections": [...]}`` object);
    ``failed`` (indices of failed expectations), when given, restricts corrections to those; ``known_files``,
    when given, restricts corrected file_exists paths to those files.
    """
    out = [copy.deepcopy(dict(e)) for e in expectations_json]
    if isinstance(proposals, Mapping):
        proposals = proposals.get("corrections")
    if proposals is None:
        return CorrectionPlan(out, [], [])
    if not isinstance(proposals, list):
        return CorrectionPlan(out, [], [Rejected(copy.deepcopy(proposals), "corrections is not a list")])
    rejected: list[Rejected] = []
    wanted: dict[int, list[Mapping[str, Any]]] = {}
    for p in proposals:
        if not isinstance(p, Mapping):
            rejected.append(Rejected(copy.deepcopy(p), "not an object"))
            continue
        verdict = p.get("verdict")
        if verdict != "expectation_wrong":
            rejected.append(Rejected(dict(p), f"verdict {verdict!r}: the expectation stays as it is"))
            continue
        idx = _resolve_index(p, out, failed)
        if isinstance(idx, str):
            rejected.append(Rejected(dict(p), idx))
            continue
        if failed is not None and idx not in failed:
            rejected.append(Rejected(dict(p), f"expectation {idx} did not fail"))
            continue
        wanted.setdefault(idx, []).append(p)
    applied: list[Correction] = []
    for idx, ps in sorted(wanted.items()):
        if len(ps) > 1:
            rejected.extend(Rejected(dict(p), f"{len(ps)} proposals for expectation {idx}: ambiguous") for p in ps)
            continue
        p = ps[0]
        exp = out[idx]
        if exp.get("confidence") == "firm":
            rejected.append(Rejected(dict(p), f"expectation {idx} is marked firm"))
            continue
        fix = p.get("fix")
        if not isinstance(fix, Mapping):
            rejected.append(Rejected(dict(p), "no fix given"))
            continue
        result = _correct(exp, fix, floor, known_files)
        if isinstance(result, str):
            rejected.append(Rejected(dict(p), result))
            continue
        new, name, old, value, note = result
        out[idx] = new
        applied.append(Correction(idx, str(exp.get("type")), name, old, value,
                                  str(p.get("reason") or ""), note))
    return CorrectionPlan(out, applied, rejected)


def apply_corrections(expectations_json: Sequence[Mapping[str, Any]], proposals: object,
                      floor: float = DEFAULT_FLOOR, *,
                      failed: Collection[int] | None = None,
                      known_files: Collection[str] | None = None) -> tuple[list[dict[str, Any]], list[Correction]]:
    """``(new_expectations, applied)``; the rejected proposals and their reasons are in :func:`plan_corrections`."""
    plan = plan_corrections(expectations_json, proposals, floor=floor, failed=failed, known_files=known_files)
    return plan.expectations, plan.applied


@dataclass
class JudgeResult:
    expectations: list[dict[str, Any]]
    """The expectations to use from now on (a copy of the input when nothing was applied)."""
    applied: list[Correction] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    """``[{index, verdict, reason}]`` as the judge gave them."""
    error: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    reply: str | None = None
    tokens: int = 0
    cost: float | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    duration: float = 0.0

    @property
    def changed(self) -> bool:
        return bool(self.applied)

    def to_json(self) -> dict[str, Any]:
        return {"expectations": self.expectations, "applied": [c.to_json() for c in self.applied],
                "rejected": [r.to_json() for r in self.rejected], "verdicts": self.verdicts, "error": self.error,
                "messages": self.messages, "reply": self.reply, "tokens": self.tokens, "cost": self.cost,
                "tokensIn": self.tokens_in, "tokensOut": self.tokens_out, "duration": round(self.duration, 3)}


def _verdicts(corrections: object) -> list[dict[str, Any]]:
    if not isinstance(corrections, list):
        return []
    return [{"index": c.get("index"), "type": c.get("type"), "verdict": c.get("verdict"),
             "reason": c.get("reason")} for c in corrections if isinstance(c, Mapping)]


def _corrections(content: str | None) -> object:
    """The ``corrections`` of ``{"corrections": [...]}``, or a bare array of them, or the JSONNotFound error.

    An object without ``corrections`` (``{}``) means no corrections. A bare array is looked for only when the
    first object found has no ``corrections`` key, since that object may be the array's first element.
    """
    try:
        data = extract_json(content, kind="object")
    except JSONNotFound as exc:
        try:
            return extract_json(content, kind="array")
        except JSONNotFound:
            return exc
    if "corrections" in data:
        return data["corrections"]
    try:
        return extract_json(content, kind="array")
    except JSONNotFound:
        return None


async def judge_expectations(client: LLMClient, settings: ModelSettings, *, title: str, description: str,
                             agent_output: str, failed: list[dict[str, Any]], expectations: list[dict[str, Any]],
                             floor: float = DEFAULT_FLOOR, files_changed: Sequence[str] | None = None) -> JudgeResult:
    """Ask the judge about the failed expectations and apply the safe corrections. Never raises.

    ``failed``: the failed check rows, each with ``index`` (the expectation's position in ``expectations``),
    ``type``, ``message`` and optionally ``details`` / ``globalScore``. ``expectations``: the task's
    expectations as JSON (camelCase, as in the mission file). ``files_changed``: the files the attempt created
    or edited; shown to the judge, and when given (non-empty) a corrected file_exists path must be one of them.
    """
    base = [copy.deepcopy(dict(e)) for e in expectations]
    if not failed:
        return JudgeResult(expectations=base, error="no failed expectation to judge")
    messages = [{"role": "system", "content": prompts.JUDGE_SYSTEM},
                {"role": "user", "content": redact(prompts.judge_user(
                    title=title, description=description, agent_output=agent_output, failed=failed,
                    expectations=expectations, floor=floor, files_changed=files_changed or ()))}]
    result = JudgeResult(expectations=base, messages=messages)
    start = time.monotonic()
    try:
        reply = await client.chat(settings, messages, max_tokens=2000)
    except LLMError as exc:
        result.error = f"{exc.kind}: {exc.message}"
        result.duration = time.monotonic() - start
        return result
    except Exception as exc:
        result.error = redact(f"internal error: {type(exc).__name__}: {exc}")[:2000]
        result.duration = time.monotonic() - start
        return result
    result.duration = time.monotonic() - start
    result.tokens = reply.prompt_tokens + reply.completion_tokens
    result.tokens_in, result.tokens_out = reply.prompt_tokens, reply.completion_tokens
    result.cost = reply.cost
    result.reply = redact(reply.content or "")[:20_000]
    corrections = _corrections(reply.content)
    if isinstance(corrections, JSONNotFound):
        result.error = f"the judge's reply has no JSON: {corrections}"
        return result
    result.verdicts = _verdicts(corrections)
    failed_idx = {f["index"] for f in failed if isinstance(f.get("index"), int)}
    try:
        plan = plan_corrections(expectations, corrections, floor=floor, failed=failed_idx,
                                known_files=list(files_changed) if files_changed else None)
    except Exception as exc:  # plan_corrections is total over JSON input; this guards against a bug in it
        result.error = redact(f"internal error: {type(exc).__name__}: {exc}")[:2000]
        return result
    result.expectations = plan.expectations
    result.applied = plan.applied
    result.rejected = plan.rejected
    return result
