"""One verdict on a mission file, shared by the daemon's intake and ``polpo validate`` so they agree on every file.

The verdict is the loader's, plus what only the daemon knew before: notification channels named by gates
and by scoped notification rules, the config's ``[security]`` policy (``policy``), and the store's round trip (the accepted spec is stored as canonical JSON and a restart parses it back, so a
spec that would not read back is refused now instead of failing every restart). An exception anywhere in
that is an ``internal error`` verdict for this file, never a crash.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from polpo.intake.reader import Unreadable
from polpo.intake.scoped import channel_text, scoped_problems
from polpo.mission.jsonbytes import carryable
from polpo.mission.loader import Problem, load_mission
from polpo.mission.schema import MissionSpec
from polpo.model.doc import MissionDoc

__all__ = ["INTERNAL_ERROR", "INVALID", "MAX_REPORTED", "Policy", "Verdict", "cap", "check_mission", "internal_error",
           "needs_a_judge", "stored_round_trip", "unknown_channels", "unreadable"]

log = logging.getLogger("polpo.intake")

INVALID = "invalid"
INTERNAL_ERROR = "internal error"
MAX_REPORTED = 50  # problems listed per file (in the event, and by `polpo validate` without --all)
_MAX_ERROR_TEXT = 500


@dataclass(frozen=True)
class Verdict:
    """``spec`` (ready to accept) iff there are no problems; ``reason`` says why not.

    ``spec`` is the head of the stored form (:class:`polpo.model.doc.MissionDoc`, read back the way recovery reads
    it): its ``tasks`` parse from that JSON on access, so a big mission is not held as models."""

    spec: MissionSpec | None
    problems: list[Problem]
    warnings: list[str]
    reason: str | None  # None when ok; invalid | internal error | not a regular file | too large | unreadable


Policy = Callable[[MissionSpec], list[Problem]]


def check_mission(raw: bytes, *, known_agents: Collection[str] | None, channels: Collection[str] | None,
                  policy: Policy | None = None, judge: bool | None = None) -> Verdict:
    """Load, check the channels and the policy, and round-trip through the stored form.

    ``None`` for ``known_agents`` or ``channels``: not known, not checked (event globs are checked anyway).
    ``judge``: whether the config has a judge for ``llm_review`` checks (None: not known, no warning).
    """
    try:
        result = load_mission(raw, known_agents=known_agents)
        if result.spec is None:
            return Verdict(None, result.problems, result.warnings, INVALID)
        problems = (unknown_channels(result.spec, channels) + scoped_problems(result.spec, channels)
                    + (policy(result.spec) if policy is not None else []))
        if problems:
            return Verdict(None, problems, result.warnings, INVALID)
        stored, warnings = MissionDoc.of(result.spec), [*result.warnings, *needs_a_judge(result.spec, judge)]
        del result  # the loader's models go before the stored form is read back: one full copy at a time
        return Verdict(MissionDoc.parse(stored.blob).head, [], warnings, None)
    except Exception as exc:
        log.exception("internal error while checking a mission file")
        return internal_error(exc)


def stored_round_trip(spec: MissionSpec) -> MissionSpec:
    """The spec as a restart reads it back, as models: admission stores this JSON, recovery parses it."""
    return MissionSpec.model_validate_json(MissionDoc.of(spec).text())


def internal_error(exc: BaseException) -> Verdict:
    text = carryable(f"{type(exc).__name__}: {exc}")
    if len(text) > _MAX_ERROR_TEXT:
        text = text[:_MAX_ERROR_TEXT] + f"… ({len(text) - _MAX_ERROR_TEXT} more characters)"
    message = (f"internal error in polpo while reading this file ({text}); the daemon's log has the details. "
               "The file is not retried until it changes")
    return Verdict(None, [Problem("$", message)], [], INTERNAL_ERROR)


def unreadable(u: Unreadable) -> Verdict:
    return Verdict(None, [Problem("$", u.message)], [], u.reason)


def unknown_channels(spec: MissionSpec, known: Collection[str] | None) -> list[Problem]:
    """A gate's, checkpoint's or delay's notifyChannels must name channels of the config, or its notifications
    would vanish."""
    if known is None:
        return []
    places: tuple[tuple[str, list[list[str]]], ...] = (
        ("qualityGates", [g.notify_channels for g in spec.quality_gates]),
        ("checkpoints", [c.notify_channels for c in spec.checkpoints]),
        ("delays", [d.notify_channels for d in spec.delays]))
    return [Problem(f"$.{key}[{i}].notifyChannels[{j}]", channel_text(name, known))
            for key, lists in places for i, names in enumerate(lists) for j, name in enumerate(names)
            if name not in known]


def needs_a_judge(spec: MissionSpec, judge: bool | None) -> list[str]:
    """A warning for each task whose ``llm_review`` checks the config has no judge for: accepted, the task would
    wait on hold after its agent ran."""
    if judge is not False:
        return []
    return [f"$.tasks[{i}]: its llm_review check needs a judge and the config has none, so the task would wait on "
            "hold once its agent has run; set [judge] model in the config (or POLPO_JUDGE_MODEL) first"
            for i, t in enumerate(spec.tasks)
            if any(getattr(e, "type", None) == "llm_review" for e in t.all_expectations)]


def cap(problems: Sequence[Problem], limit: int | None = MAX_REPORTED) -> tuple[list[Problem], int]:
    """The first ``limit`` problems (all if None) and how many were left out."""
    if limit is None or len(problems) <= limit:
        return list(problems), 0
    return list(problems[:limit]), len(problems) - limit
