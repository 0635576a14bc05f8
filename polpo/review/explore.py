"""A reviewer's first phase: read and run the work, write an analysis that cites evidence.

The changed files that fit are in the prompt, numbered by line (a small model that must call ``read_file`` to
see a 20-line function often never does; a reviewer that sees the lines can cite them). The read-only tools see
the workspace; ``run_command`` runs in the seat's own throw-away copy (:class:`~polpo.review.scratch.Scratch`,
made on its first call), so a reviewer can probe the work — call a function, run the tests — and never change
what it judges. A turn the server could not parse (llama-server's 500 on a malformed tool call) is not the end
of the review: the analysis is asked for at once, without tools.
"""

from __future__ import annotations

from typing import Any

from polpo.clock import SystemClock
from polpo.llm.client import LLMError
from polpo.llm.failures import says_unparsed
from polpo.llm.secrets import redact
from polpo.review import prompts
from polpo.review.context import MODEL_TOOL_RESULT_MAX, REVIEW_TOOLS, ReviewContext, ReviewRun, Seat
from polpo.review.dimensions import Dim, render_rubric
from polpo.review.scratch import Scratch
from polpo.review.work_files import INLINE_CHARS, numbered_files
from polpo.tools.commands import RUN_COMMAND
from polpo.tools.output import ToolOutput, fail
from polpo.tools.registry import ToolContext, ToolRegistry
from polpo.tools.replay import replayable

__all__ = ["analyse_output", "explore"]

WRAP_UP_BEFORE = 5
COMMAND_TIMEOUT = 30.0
TOOLS_WITH_RUN = ToolRegistry([*REVIEW_TOOLS, RUN_COMMAND])


def _budget(window: int | None) -> int:
    return INLINE_CHARS if window is None else max(1_000, min(INLINE_CHARS, window * 3 // 6))


async def explore(run: ReviewRun, ctx: ReviewContext, dims: list[Dim], max_turns: int, seat: Seat) -> str:
    names = [d.name for d in dims]
    context = ToolContext(ctx.workspace)
    scratch = seat.scratch = Scratch(ctx.workspace, ctx.files_changed)
    tools = TOOLS_WITH_RUN.schemas()
    convo: list[dict[str, Any]] = [
        {"role": "system", "content": prompts.REVIEW_FILES_SYSTEM},
        {"role": "user", "content": redact(prompts.review_files_user(
            title=ctx.title, description=ctx.description, criteria=ctx.criteria, attempt=ctx.attempt,
            files_changed=ctx.files_changed, timeline=ctx.timeline, rubric=render_rubric(dims), dim_names=names,
            max_turns=max_turns, window=run.settings.context_window, evidence=seat.evidence_text(),
            shown_files=numbered_files(seat.files, _budget(run.settings.context_window)),
            reference=ctx.reference, framing=seat.plan.framing))},
    ]
    for m in convo:
        run.record(1, m)
    texts: list[str] = []
    force_final = False
    for turn in range(1, max_turns + 1):
        last = turn == max_turns or force_final
        note: str | None = None
        if last:
            note = prompts.final_turn(names)
        elif turn == max_turns - WRAP_UP_BEFORE + 1 and max_turns > WRAP_UP_BEFORE:
            note = prompts.wrap_up(WRAP_UP_BEFORE)
        if note is not None:
            convo.append({"role": "user", "content": note})
            run.record(1, convo[-1])
        try:
            reply = await run.chat(convo, tools=tools, tool_choice="none" if last else "auto")
        except LLMError as exc:
            if last or not (exc.kind == "bad_output" or says_unparsed(exc.message)):
                raise
            # the server could not parse what the model wrote with tools offered (llama-server's 500 on a
            # malformed tool call): at temperature 0 the same request fails the same way, so the analysis is
            # asked for now, without tools, from what the prompt already shows
            run.trace.strategy_errors.append(f"explore: turn {turn}: {exc.kind}: {exc.message}; "
                                             "the analysis was asked for without tools")
            force_final = True
            continue
        run.trace.turns = turn
        msg = reply.as_message()
        text = (reply.content or "").strip()
        if text or reply.tool_calls:  # an empty assistant turn says nothing, and some providers refuse one
            convo.append(replayable(reply.as_message()))  # malformed arguments sent back: llama-server's 500
        run.record(1, msg)  # the trace keeps the arguments as the model wrote them
        if text:
            texts.append(text)
        if reply.tool_calls and not last:
            for call in reply.tool_calls:
                if call.name == RUN_COMMAND.name:
                    out = await _run(scratch, ctx, call.arguments)
                else:
                    out = await REVIEW_TOOLS.dispatch(context, call.name, call.arguments)
                if out.ok and call.name == "read_file":
                    path = out.data.get("path")
                    if isinstance(path, str) and path not in run.trace.files_read:
                        run.trace.files_read.append(path)
                result = {"role": "tool", "tool_call_id": call.id,
                          "content": prompts.head(redact(out.text), MODEL_TOOL_RESULT_MAX)}
                convo.append(result)
                run.record(1, result, toolName=call.name, isError=not out.ok)
            continue
        if text:
            return text
        if last:
            break
        force_final = True  # neither tools nor text: ask once more, explicitly, for the analysis
    return "\n\n".join(texts)


async def _run(scratch: Scratch, ctx: ReviewContext, arguments: str) -> ToolOutput:
    """``run_command`` in the seat's copy of the work (made now if it is not yet)."""
    root = await scratch.path()
    if root is None:
        return fail(f"run_command is not available for this review: {scratch.problem}", "unavailable")
    marker = next(iter(ctx.env.items()), None)  # the attempt's marker: a crash's orphans are found by it
    where = ToolContext(root, clock=ctx.clock or SystemClock(), command_timeout=COMMAND_TIMEOUT, env_marker=marker)
    return await TOOLS_WITH_RUN.dispatch(where, RUN_COMMAND.name, arguments)


async def analyse_output(run: ReviewRun, ctx: ReviewContext, dims: list[Dim], seat: Seat) -> str:
    convo: list[dict[str, Any]] = [
        {"role": "system", "content": prompts.REVIEW_OUTPUT_SYSTEM},
        {"role": "user", "content": redact(prompts.review_output_user(
            title=ctx.title, description=ctx.description, criteria=ctx.criteria, attempt=ctx.attempt,
            timeline=ctx.timeline, rubric=render_rubric(dims), dim_names=[d.name for d in dims],
            window=run.settings.context_window, evidence=seat.evidence_text(), reference=ctx.reference,
            framing=seat.plan.framing))},
    ]
    for m in convo:
        run.record(1, m)
    reply = await run.chat(convo)
    run.trace.turns = 1
    run.record(1, reply.as_message())
    return (reply.content or "").strip()
