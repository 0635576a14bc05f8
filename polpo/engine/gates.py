"""Quality-gate decisions. Pure: the afterTasks' states and scores in, a decision out.

A gate is decided once, when every afterTask is terminal (``done`` or ``failed``); until then it is
``waiting``. The rules, in order:

1. An afterTask the caller does not know (not in ``after_states``) fails the gate at once: the loader checks
   titles, so this is a wiring bug, and waiting for it would block the gate's tasks forever (Polpo waits).
2. Any afterTask not terminal → ``waiting``.
3. ``requireAllPassed`` and any afterTask ``failed`` → ``failed`` ("required tasks failed: …").
4. ``minScore`` set → the mean score of the afterTasks that are ``done`` **and** have a score:

   * a ``done`` task without a score (no ``llm_review`` check) does not count toward the mean;
   * a ``failed`` task never counts (it only matters through ``requireAllPassed``), even if it has a score;
   * no scored ``done`` task at all → ``failed`` with an explicit reason, never a comparison against nothing;
   * ``mean >= minScore`` passes (inclusive, with a 1e-9 tolerance for float sums).
5. Otherwise → ``passed``. A gate with neither ``minScore`` nor ``requireAllPassed`` passes once its
   afterTasks are terminal, even if they all failed: it is then only an ordering point.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple, Protocol

__all__ = ["GateDecision", "GateLike", "TaskState", "evaluate_gate"]

TERMINAL = frozenset({"done", "failed"})
_EPS = 1e-9


class GateLike(Protocol):
    """What a decision needs from a gate (``polpo.mission.schema.QualityGate`` fits)."""

    @property
    def after_tasks(self) -> Sequence[str]: ...

    @property
    def min_score(self) -> float | None: ...

    @property
    def require_all_passed(self) -> bool: ...


class TaskState(NamedTuple):
    """An afterTask's status and score (the global score of the assessment that passed it, if any)."""

    status: str
    score: float | None = None


@dataclass(frozen=True)
class GateDecision:
    status: Literal["waiting", "passed", "failed"]
    reason: str
    avg_score: float | None = None  # only when minScore is set and some done afterTask has a score


def evaluate_gate(gate: GateLike, after_states: Mapping[str, tuple[str, float | None]]) -> GateDecision:
    """Decide ``gate`` from ``after_states`` (title → ``(status, score|None)``); see the module docstring."""
    return _decide(gate, after_states)


def _decide(gate: GateLike, after_states: Mapping[str, tuple[str, float | None]]) -> GateDecision:
    titles = list(dict.fromkeys(gate.after_tasks))
    unknown = [t for t in titles if t not in after_states]
    if unknown:
        return GateDecision("failed", "afterTasks not in the mission: " + ", ".join(unknown))
    waiting = [t for t in titles if after_states[t][0] not in TERMINAL]
    if waiting:
        return GateDecision("waiting", "waiting for: " + ", ".join(waiting))
    failed = [t for t in titles if after_states[t][0] == "failed"]
    if gate.require_all_passed and failed:
        return GateDecision("failed", "required tasks failed: " + ", ".join(failed))
    if gate.min_score is None:
        if failed:
            return GateDecision("passed", f"all afterTasks finished ({len(failed)} failed; the gate does not "
                                          "require them to pass)")
        return GateDecision("passed", "all afterTasks finished")
    return _score_decision(gate.min_score, titles, after_states)


def _score_decision(min_score: float, titles: list[str],
                    after_states: Mapping[str, tuple[str, float | None]]) -> GateDecision:
    done = [t for t in titles if after_states[t][0] == "done"]
    scored = {t: s for t in done if (s := after_states[t][1]) is not None}
    if not scored:
        why = ("every afterTask failed" if not done
               else f"no llm_review check scored {', '.join(done)}")
        return GateDecision("failed", f"no task in afterTasks has a score ({why}); minScore {min_score:g} "
                                      "needs at least one done task with an llm_review score")
    avg = sum(scored.values()) / len(scored)
    unscored = [t for t in done if t not in scored]
    note = f" (not counted, no score: {', '.join(unscored)})" if unscored else ""
    if avg + _EPS >= min_score:
        return GateDecision("passed", f"average score {avg:.2f} ≥ minScore {min_score:g}{note}", avg)
    return GateDecision("failed", f"average score {avg:.2f} below minScore {min_score:g}{note}", avg)
