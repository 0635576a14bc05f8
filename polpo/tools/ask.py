"""The ``ask_human`` tool of LLM agents that may ask a person (``[agents.X] ask_human = true``).

Its handler never runs: the agent's tool loop stops at the call, the question is stored and the task waits for the
answer, which comes back as the call's result when the conversation goes on (:mod:`polpo.model.questions`). It is
a :class:`~polpo.tools.registry.Tool` so its arguments are bound and its errors shaped like every other tool's.
"""

from __future__ import annotations

from pydantic import Field

from polpo.tools.output import ToolOutput, fail
from polpo.tools.registry import Tool, ToolArgs, ToolContext

__all__ = ["ASK_HUMAN", "AskHumanArgs"]

MAX_QUESTION_CHARS = 4_000


class AskHumanArgs(ToolArgs):
    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS,
                          description="The question, complete on its own: the person reads only this.")


async def _never(ctx: ToolContext, args: AskHumanArgs) -> ToolOutput:
    return fail("ask_human is answered by a person, not run", "internal")


ASK_HUMAN = Tool(
    name="ask_human",
    description=("Ask the person who runs this mission a question, when you cannot go on well without their "
                 "decision: a requirement that is missing or ambiguous, a choice only they can make. Your session "
                 "pauses until they answer (it may take hours); the answer is this call's result. Look in the "
                 "workspace first: ask only what you cannot find out yourself, one question per call."),
    args=AskHumanArgs,
    handler=_never,
    read_only=True,
)
