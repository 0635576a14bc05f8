"""What an attempt is given beyond its task: the prompt as its row keeps it, the mission's other tasks."""

from __future__ import annotations

import itertools

from polpo.model.records import Mission, Task

__all__ = ["MAX_SIBLINGS", "PROMPT_DESCRIPTION_MAX", "siblings", "stored_prompt"]

MAX_SIBLINGS = 50  # other tasks' titles and states an LLM agent is told about
PROMPT_DESCRIPTION_MAX = 16 * 1024  # a longer description is not copied into every attempt's row


def stored_prompt(prompt: str, description: str) -> str:
    """The prompt as the attempt row keeps it: a long description is stored once, in the mission's spec."""
    if len(description) <= PROMPT_DESCRIPTION_MAX:
        return prompt
    return prompt.replace(description, f"[the task's description, {len(description)} characters: see the "
                                       "mission's spec]", 1)


def siblings(m: Mission, task: Task) -> tuple[tuple[str, str], ...]:
    """(title, status) of the mission's other tasks for an LLM agent's prompt, at most MAX_SIBLINGS of them."""
    others = ((t.title, str(t.status)) for t in m.tasks.values() if t.id != task.id)
    return tuple(itertools.islice(others, MAX_SIBLINGS))
