"""One G-Eval reviewer: Phase 1 gathers evidence, Phase 2 turns it into validated scores. Never raises.

Phase 1 — evidence. If the attempt changed files, the reviewer explores the workspace through the sandboxed
read-only tools (:data:`REVIEW_TOOLS`: ``read_file``, ``glob``, ``grep``, ``list_dir``) for up to ``max_turns``
model calls; five turns before the end it is told to wrap up, and the last turn is sent with
``tool_choice="none"`` so it has to write its analysis. If the attempt changed no files there is nothing to
explore: the timeline and output are in the prompt and one tool-less call writes the analysis.

Phase 2 — scoring. A separate conversation that only sees the analysis and the rubric, and must produce
``submit_review {scores: [{dimension, score, reasoning, evidence}], summary, suggestions?}``. Strategies, in order,
the first valid payload wins:

1. ``forced_tool``: the tool offered with a forced ``tool_choice``;
2. ``auto_tool``: same conversation, the rejected answer and the reason appended, ``tool_choice="auto"``;
3. ``json_text``: a fresh tool-less request for JSON only (for providers without tool calling), parsed leniently.

In 1 and 2 a reply without a tool call but with a JSON object in its text is accepted too. Each payload is
validated by pydantic: a score must be a number in 1..5 (``"4"`` is read as 4; 7 or 0 is an *error of that
strategy*, recorded, never clamped: a model that answers outside the scale did not follow the rubric), every
dimension must be scored exactly once, and scores for dimensions not in the list are ignored (listed in
``ignoredDimensions``) rather than failing the payload, since they do not change the verdict. Scores keep their
value (3.5 stays 3.5). Every failed strategy's error is kept in ``strategyErrors``.

Everything sent to the model and stored in the trace goes through :func:`~polpo.llm.secrets.redact`; tool results
are cut at :data:`MODEL_TOOL_RESULT_MAX` characters for the model and :data:`TRACE_TOOL_RESULT_MAX` in the trace.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from polpo.llm import lenient_json
from polpo.llm.client import ChatClient, ChatReply, LLMError, ModelSettings
from polpo.llm.secrets import redact
from polpo.review import prompts
from polpo.review.consensus import DimScore, weighted_score
from polpo.review.dimensions import Dim, render_rubric
from polpo.review.parsing import JSONNotFound, extract_json
from polpo.review.submission import Submission, validate_submission
from polpo.review.trace import ReviewerTrace
from polpo.tools.catalog import TOOLS
from polpo.tools.registry import ToolContext

__all__ = ["DEFAULT_MAX_TURNS", "MODEL_TOOL_RESULT_MAX", "REVIEW_TOOLS", "STRATEGIES", "TRACE_TOOL_RESULT_MAX",
           "ReviewContext", "ReviewerTrace", "run_reviewer"]

DEFAULT_MAX_TURNS = 20
WRAP_UP_BEFORE = 5
MODEL_TOOL_RESULT_MAX = 60_000
TRACE_TOOL_RESULT_MAX = 4_000
TRACE_TEXT_MAX = 40_000
STRATEGIES: tuple[str, ...] = ("forced_tool", "auto_tool", "json_text")
REVIEW_TOOLS = TOOLS.read_only()
"""What a reviewer may call in phase 1: the tools whose ``read_only`` flag is set."""


@dataclass(frozen=True)
class ReviewContext:
    """What the reviewers know about the attempt under review."""

    title: str
    description: str
    criteria: str
    workspace: Path
    files_changed: list[str]
    """Files the attempt created or edited, relative to the workspace. Empty → output-based review (no tools)."""
    timeline: str
    """The execution timeline, output, stderr and registered outcomes, as text."""
    attempt: int = 1


class _Run:
    """Mutable state of one reviewer run, so a timeout still returns everything gathered so far."""

    def __init__(self, client: ChatClient, settings: ModelSettings, trace: ReviewerTrace) -> None:
        self.client = client
        self.settings = settings
        self.trace = trace
        self.start = time.monotonic()
        self.costs: list[float] = []

    def record(self, phase: int, msg: Mapping[str, Any], **extra: Any) -> None:
        entry: dict[str, Any] = {"phase": phase, "role": msg["role"]}
        content = msg.get("content")
        if content is not None:
            limit = TRACE_TOOL_RESULT_MAX if msg["role"] == "tool" else TRACE_TEXT_MAX
            entry["content"] = prompts.head(redact(str(content)), limit)
        if msg.get("tool_calls"):
            entry["toolCalls"] = [{"id": c["id"], "name": c["function"]["name"],
                                   "arguments": redact(c["function"]["arguments"])[:TRACE_TOOL_RESULT_MAX]}
                                  for c in msg["tool_calls"]]
        if msg.get("tool_call_id"):
            entry["toolCallId"] = msg["tool_call_id"]
        entry.update(extra)
        entry["at"] = round(time.monotonic() - self.start, 3)
        self.trace.messages.append(entry)

    async def chat(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatReply:
        reply = await self.client.chat(self.settings, [dict(m) for m in messages], **kwargs)
        if reply.cached:
            self.trace.cache_hits += 1
            return reply  # a cached answer costs nothing now
        self.trace.cache_misses += reply.cached is False
        self.trace.tokens += reply.prompt_tokens + reply.completion_tokens
        self.trace.tokens_in += reply.prompt_tokens
        self.trace.tokens_out += reply.completion_tokens
        if reply.cost is not None:
            self.costs.append(reply.cost)
            self.trace.cost = math.fsum(self.costs)
        return reply


async def run_reviewer(client: ChatClient, settings: ModelSettings, *, index: int, ctx: ReviewContext,
                       dims: Sequence[Dim], max_turns: int = DEFAULT_MAX_TURNS,
                       time_limit: float | None = None) -> ReviewerTrace:
    """Run one reviewer to the end (or to ``time_limit`` seconds). Never raises: failures are ``ok=False``.

    ``index`` is the reviewer's number in the panel (0, 1, 2; a re-run panel continues with 3, 4, 5).
    """
    trace = ReviewerTrace(index=index, model=settings.model, mode="files" if ctx.files_changed else "output")
    run = _Run(client, settings, trace)
    try:
        with anyio.move_on_after(time_limit) as scope:
            await _review(run, ctx, list(dims), max(1, max_turns))
        if scope.cancelled_caught:
            trace.ok = False
            trace.error = f"timed out after {time_limit:g} s" + (f" ({trace.error})" if trace.error else "")
            # the server answered its turns, so it is up: this review is too long (runaway), not an outage
            trace.error_kind = "runaway" if trace.turns else "time_limit"
        elif not trace.ok and trace.error_kind is None:
            trace.error_kind = "invalid"
    except LLMError as exc:
        trace.ok = False
        trace.error = f"{exc.kind}: {exc.message}"
        trace.error_kind = exc.kind
    except Exception as exc:  # a reviewer never takes the panel down
        trace.ok = False
        trace.error = redact(f"internal error: {type(exc).__name__}: {exc}")[:2000]
        trace.error_kind = "internal"
    trace.duration = time.monotonic() - run.start
    return trace


def _redacted(score: DimScore) -> DimScore:
    evidence = json.loads(redact(json.dumps(score.evidence))) if score.evidence else []
    return DimScore(score.dimension, score.score, redact(score.reasoning), evidence)


async def _review(run: _Run, ctx: ReviewContext, dims: list[Dim], max_turns: int) -> None:
    trace = run.trace
    if not dims:
        raise ValueError("no dimensions to score")
    if trace.mode == "files":
        analysis = await _explore(run, ctx, dims, max_turns)
    else:
        analysis = await _analyse_output(run, ctx, dims)
    trace.analysis = analysis = redact(analysis)  # the model may quote a secret it read; nothing stores it raw
    if not analysis.strip():
        trace.error = "phase 1 produced no analysis"
        return
    submission = await _score(run, dims, analysis)
    if submission is None:
        trace.error = "no valid scores: " + " | ".join(trace.strategy_errors)
        return
    trace.scores = [_redacted(sc) for sc in submission.scores]
    trace.summary = redact(submission.summary)
    trace.suggestions = [redact(x) for x in submission.suggestions]
    trace.ignored_dimensions = submission.ignored
    trace.global_score = weighted_score([(s.score, d.weight) for s, d in zip(submission.scores, dims, strict=True)])
    trace.ok = True


async def _explore(run: _Run, ctx: ReviewContext, dims: list[Dim], max_turns: int) -> str:
    names = [d.name for d in dims]
    context = ToolContext(ctx.workspace)
    tools = REVIEW_TOOLS.schemas()
    convo: list[dict[str, Any]] = [
        {"role": "system", "content": prompts.REVIEW_FILES_SYSTEM},
        {"role": "user", "content": redact(prompts.review_files_user(
            title=ctx.title, description=ctx.description, criteria=ctx.criteria, attempt=ctx.attempt,
            files_changed=ctx.files_changed, timeline=ctx.timeline, rubric=render_rubric(dims), dim_names=names,
            max_turns=max_turns, window=run.settings.context_window))},
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
        reply = await run.chat(convo, tools=tools, tool_choice="none" if last else "auto")
        run.trace.turns = turn
        msg = reply.as_message()
        text = (reply.content or "").strip()
        if text or reply.tool_calls:  # an empty assistant turn says nothing, and some providers refuse one
            convo.append(msg)
        run.record(1, msg)
        if text:
            texts.append(text)
        if reply.tool_calls and not last:
            for call in reply.tool_calls:
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


async def _analyse_output(run: _Run, ctx: ReviewContext, dims: list[Dim]) -> str:
    convo: list[dict[str, Any]] = [
        {"role": "system", "content": prompts.REVIEW_OUTPUT_SYSTEM},
        {"role": "user", "content": redact(prompts.review_output_user(
            title=ctx.title, description=ctx.description, criteria=ctx.criteria, attempt=ctx.attempt, timeline=ctx.timeline,
            rubric=render_rubric(dims), dim_names=[d.name for d in dims], window=run.settings.context_window))},
    ]
    for m in convo:
        run.record(1, m)
    reply = await run.chat(convo)
    run.trace.turns = 1
    run.record(1, reply.as_message())
    return (reply.content or "").strip()


def _from_reply(reply: ChatReply, dims: Sequence[Dim]) -> tuple[Submission | None, str | None]:
    """The submission in a tool-strategy reply (a submit_review call, else JSON in the text), or an error."""
    call = next((c for c in reply.tool_calls if c.name == prompts.SUBMIT_REVIEW), None)
    if call is not None:
        try:
            data = lenient_json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError as exc:
            return None, f"submit_review arguments are not valid JSON: {exc}"
        try:
            return validate_submission(data, dims), None
        except ValueError as exc:
            return None, str(exc)
    others = [c.name for c in reply.tool_calls]
    try:
        data = extract_json(reply.content, kind="object")
    except JSONNotFound:
        called = f" (it called {', '.join(others)})" if others else ""
        return None, f"no submit_review call{called} and no JSON object in the reply"
    try:
        return validate_submission(data, dims), None
    except ValueError as exc:
        return None, str(exc)


async def _score(run: _Run, dims: list[Dim], analysis: str) -> Submission | None:
    names = [d.name for d in dims]
    rubric = render_rubric(dims)
    trace = run.trace
    tool = prompts.submit_review_tool(names)
    convo: list[dict[str, Any]] = [
        {"role": "system", "content": prompts.SCORING_SYSTEM},
        {"role": "user", "content": redact(prompts.scoring_user(analysis=analysis, rubric=rubric, dim_names=names))},
    ]
    for m in convo:
        run.record(2, m, strategy=STRATEGIES[0])
    choices: list[str | dict[str, Any]] = [
        {"type": "function", "function": {"name": prompts.SUBMIT_REVIEW}}, "auto"]
    provider_errors: list[LLMError] = []  # every strategy failed on the provider: an outage, not bad output
    tried = 0
    for strategy, choice in zip(STRATEGIES[:2], choices, strict=True):
        tried += 1
        try:
            reply = await run.chat(convo, tools=[tool], tool_choice=choice)
        except LLMError as exc:
            trace.strategy_errors.append(f"{strategy}: {exc.kind}: {exc.message}")
            provider_errors.append(exc)
            if exc.kind == "context_overflow":
                break  # the next tool strategy sends this same conversation: it cannot fit either
            continue
        msg = reply.as_message()
        run.record(2, msg, strategy=strategy)
        submission, error = _from_reply(reply, dims)
        if submission is not None:
            trace.strategy = strategy
            return submission
        trace.strategy_errors.append(f"{strategy}: {error}")
        convo.append(msg)
        feedback = prompts.retry_scoring(str(error), names)
        if reply.tool_calls:  # every tool call needs its answer before the conversation can go on
            for c in reply.tool_calls:
                text = feedback if c.name == prompts.SUBMIT_REVIEW else f"Error: only {prompts.SUBMIT_REVIEW} is available"
                convo.append({"role": "tool", "tool_call_id": c.id, "content": text})
                run.record(2, convo[-1], strategy=strategy, toolName=c.name, isError=True)
        else:
            convo.append({"role": "user", "content": feedback})
            run.record(2, convo[-1], strategy=strategy)
    strategy = STRATEGIES[2]
    plain: list[dict[str, Any]] = [
        {"role": "system", "content": prompts.JSON_SCORER_SYSTEM},
        {"role": "user", "content": redact(prompts.json_scorer_user(
            analysis=analysis, rubric=rubric, dim_names=names, errors=trace.strategy_errors))},
    ]
    for m in plain:
        run.record(2, m, strategy=strategy)
    try:
        reply = await run.chat(plain)
    except LLMError as exc:
        trace.strategy_errors.append(f"{strategy}: {exc.kind}: {exc.message}")
        if len(provider_errors) == tried:
            raise
        return None
    run.record(2, reply.as_message(), strategy=strategy)
    try:
        submission = validate_submission(extract_json(reply.content, kind="object"), dims)
    except ValueError as exc:  # JSONNotFound is a ValueError
        trace.strategy_errors.append(f"{strategy}: {exc}")
        return None
    trace.strategy = strategy
    return submission
