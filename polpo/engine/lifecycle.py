"""The task state machine: a pure table of (state, trigger) → state.

States keep Polpo's names so its users read the log the same way. Unlike Polpo, every change goes through
this table and is announced by a ``task:transition`` event — there is no "unsafe" side door.
"""

from __future__ import annotations

from typing import Final

STATES: Final = ("pending", "assigned", "in_progress", "review", "awaiting_approval", "done", "failed")

TRANSITIONS: Final[dict[tuple[str, str], str]] = {
    ("pending", "dispatch"): "assigned",            # picked by the dispatcher; attempt row written
    ("assigned", "spawned"): "in_progress",         # the agent's process started
    ("assigned", "interrupted"): "pending",         # daemon stopped before the agent started
    ("in_progress", "finished"): "review",          # agent exited (any exit code, timeout or spawn error)
    ("in_progress", "interrupted"): "pending",      # daemon stopped or crashed while the agent ran
    ("review", "pass"): "done",
    ("review", "fix"): "pending",                   # targeted fix with feedback
    ("review", "retry"): "pending",                 # full retry from scratch
    ("review", "escalate"): "pending",              # retries used up: a stronger model or a fallback agent
    ("review", "exhausted"): "failed",              # retries used up
    ("review", "block"): "awaiting_approval",       # sideEffects: a person must approve a re-run
    ("awaiting_approval", "approve"): "pending",
    ("pending", "dependency_failed"): "failed",
    ("pending", "gate_failed"): "failed",
    ("failed", "manual_retry"): "pending",          # `polpo retry TASK`
    ("failed", "reopen"): "pending",                # its failed dependency was retried
    **{(s, "cancel"): "failed" for s in ("pending", "assigned", "in_progress", "review", "awaiting_approval")},
    **{(s, "sla_fail"): "failed" for s in ("pending", "assigned", "in_progress", "review", "awaiting_approval")},
}

TRIGGERS: Final = tuple(sorted({t for _, t in TRANSITIONS}))


class InvalidTransition(ValueError):
    def __init__(self, state: str, trigger: str) -> None:
        allowed = sorted(t for (s, t) in TRANSITIONS if s == state)
        super().__init__(
            f"invalid transition: {state!r} on {trigger!r} (allowed: {', '.join(allowed) or 'none'})"
        )
        self.state = state
        self.trigger = trigger


def next_state(state: str, trigger: str) -> str:
    try:
        return TRANSITIONS[(state, trigger)]
    except KeyError:
        raise InvalidTransition(state, trigger) from None


def is_terminal(state: str) -> bool:
    return state in ("done", "failed")
