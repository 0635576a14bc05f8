"""The panel's evidence step: what running the work establishes, gathered once for every seat, with the first
judge writing its own code when the evidence needs it (an implementation for the probes, a program for a text
answer), and that call's record and spend."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from polpo.llm.client import ChatClient, LLMError, ModelSettings
from polpo.llm.secrets import redact
from polpo.review.answer_probe import answer_messages, answer_program
from polpo.review.answer_run import ANSWER_CALL
from polpo.review.context import ReviewContext
from polpo.review.evidence import Evidence
from polpo.review.evidence_run import gather_evidence
from polpo.review.probes import REFERENCE_TEMPERATURE, reference_code, reference_messages
from polpo.review.scratch import Scratch
from polpo.review.work_files import WorkFile

__all__ = ["panel_evidence"]


async def panel_evidence(ctx: ReviewContext, files: Sequence[WorkFile], client: ChatClient,
                         writer: ModelSettings | None) -> tuple[Evidence, dict[str, Any] | None]:
    """What can be established by running the work, once for the whole panel; and the call that wrote the
    judge's own code — an implementation for the probes (:mod:`polpo.review.probes`), or a program computing a
    text answer (:mod:`polpo.review.answer_probe`) — with its spend, when one was made. ``files`` are the
    changed files as the panel read them."""
    scratch = Scratch(ctx.workspace, ctx.files_changed, ctx.output if not ctx.files_changed else None)
    call: dict[str, Any] = {}

    async def ask(what: str, messages: list[dict[str, str]], extract: Callable[[str | None], str | None],
                  attempt: int) -> str | None:
        assert writer is not None
        settings = writer if attempt == 0 else replace(writer, temperature=REFERENCE_TEMPERATURE, seed=attempt)
        try:
            reply = await client.chat(settings, messages)
        except LLMError as exc:
            call.update(function=what, error=f"{exc.kind}: {exc.message}"[:500])
            return None
        code = extract(reply.content)
        spent = {k: (call.get(k) or 0) + (v or 0) for k, v in (("tokensIn", reply.prompt_tokens),
                                                                 ("tokensOut", reply.completion_tokens))}
        cost = None if reply.cost is None else (call.get("cost") or 0.0) + reply.cost
        call.update(function=what, code=redact(code or reply.content or "")[:4000], cost=cost, tries=attempt + 1,
                    usable=code is not None, **spent)
        return code

    async def write(name: str, attempt: int) -> str | None:
        return await ask(name, reference_messages(title=ctx.title, description=ctx.description, name=name),
                         lambda text: reference_code(text, name), attempt)

    async def answer(attempt: int) -> str | None:
        return await ask(ANSWER_CALL, answer_messages(title=ctx.title, description=ctx.description),
                         answer_program, attempt)

    try:
        evidence = await gather_evidence(description=ctx.description, criteria=ctx.criteria,
                                         work=files, output=scratch.output,
                                         checks=ctx.checks, scratch=scratch, clock=ctx.clock, env=ctx.env,
                                         write_reference=write if writer is not None else None,
                                         write_answer=answer if writer is not None else None)
    finally:
        scratch.close()
    return evidence, call or None
