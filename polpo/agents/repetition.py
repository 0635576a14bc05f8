"""A model that makes the same tool calls again and gets the same results has stopped making progress (small
local models do this: a 0.5B model rewrote the same file every turn until max_turns). The rule, pure: the same
calls with the same results twice in a row earn a nudge; a third time ends the conversation, and the attempt's
checks decide whether the work is done (the repeated call changed nothing, so the workspace is what the checks
would have seen after the first)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = ["REPEATS_TO_END", "REPEAT_NUDGE", "Repeat", "RepeatWatch", "signature"]

REPEATS_TO_END = 3  # the same turn this many times in a row ends the conversation
REPEAT_NUDGE = ("You made the same tool call again and got the same result: nothing changed. If the task is done, "
                "reply with a short summary and no tool call; otherwise try something different.")

Signature = tuple[tuple[str, str, str], ...]


class Repeat(Enum):
    NEW = "new"  # not a repeat: go on
    NUDGE = "nudge"  # the second time in a row: say so
    END = "end"  # the third: stop the conversation


def signature(calls: Sequence[tuple[str, Any, str]]) -> Signature:
    """A turn's calls as (tool, arguments in canonical JSON, result text), in order."""
    out = []
    for name, arguments, result in calls:
        try:
            canonical = json.dumps(json.loads(arguments) if isinstance(arguments, str) else arguments,
                                   sort_keys=True, separators=(",", ":"))
        except (TypeError, ValueError):
            canonical = str(arguments)
        out.append((name, canonical, result))
    return tuple(out)


@dataclass
class RepeatWatch:
    """How many turns in a row made the same calls with the same results."""

    last: Signature | None = None
    streak: int = 0
    nudged: bool = field(default=False)

    def see(self, turn: Signature) -> Repeat:
        self.streak = self.streak + 1 if turn == self.last else 1
        self.last = turn
        if self.streak >= REPEATS_TO_END:
            return Repeat.END
        if self.streak == REPEATS_TO_END - 1:
            return Repeat.NUDGE
        return Repeat.NEW
