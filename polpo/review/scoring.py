"""A reviewer's second phase: the analysis and the evidence become validated scores that cite evidence.

One conversation, three strategies in order; the first valid answer wins:

1. ``json_text``: the JSON object as the reply's text. First, because it works on every provider, small local
   models write it more reliably than a tool call (Qwen2.5-Coder-0.5B's forced and offered ``submit_review``
   calls both failed llama-server's tool-call parser), and it is where log-probabilities come back;
2. ``forced_tool``: ``submit_review`` offered with ``tool_choice="required"`` (with one tool offered, that
   forces it; llama-server ignores the object form that names the function, and every server takes the string);
3. ``auto_tool``: the same, offered.

After a rejected answer the next strategy is sent in the same conversation, the answer and the reason appended
(its tool-call arguments made strict JSON first: llama-server answers HTTP 500 to malformed ones sent back). A
reply cut off at ``max_tokens`` whose ``scores`` array was complete is read for it. One cut off inside the array
keeps the dimensions whose objects were complete, and the next strategy asks only for the rest: Qwen2.5-Coder-1.5B,
looping on one dimension's reasoning until the limit, otherwise loses the whole review, on every strategy.

Each answer is validated (:mod:`polpo.review.submission`); its scores become the probability-weighted means of
their tokens' distributions where the provider gave log-probabilities (:mod:`polpo.review.geval`). Scores whose
reasoning cites no evidence (:mod:`polpo.review.citations`) are asked about once; what is still uncited is
marked (``DimScore.cited``) and weighs less in the consensus.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from polpo.llm.client import ChatReply, LLMError
from polpo.llm.logprobs import TOP_LOGPROBS
from polpo.llm.secrets import redact
from polpo.review import score_prompts
from polpo.review.citations import cites
from polpo.review.context import ReviewContext, ReviewRun, Seat
from polpo.review.dimensions import Dim, dim_key, render_rubric
from polpo.review.geval import score_distributions
from polpo.review.parsing import JSONNotFound, complete_items, extract_json
from polpo.review.submission import Submission, merge_submissions, validate_submission
from polpo.tools.replay import replayable

__all__ = ["STRATEGIES", "render_anchors", "score", "submission_from_reply"]

STRATEGIES: tuple[str, ...] = ("json_text", "forced_tool", "auto_tool")
ANCHOR_CHARS = 1_500


def render_anchors(anchors: Sequence[Any]) -> str:
    """Scored examples as the scorer is shown them: the score, why, and the work (cut)."""
    lines = []
    for i, a in enumerate(anchors, 1):
        work = " ".join(str(a.get("output") or "").split())[:ANCHOR_CHARS]
        task = f" (task: {' '.join(str(a['task']).split())[:200]})" if a.get("task") else ""
        why = f" — why: {a['why']}" if a.get("why") else ""
        lines.append(f"Example {i}{task}: scored {a.get('score'):g}{why}\n    {work}")
    return "\n".join(lines)


def submission_from_reply(reply: ChatReply, dims: Sequence[Dim]) -> Submission:
    """The submission in a reply: a ``submit_review`` call's arguments, else the JSON object in its text, else
    (a reply cut off at ``max_tokens``) the complete objects of its ``scores`` array. ValueError with the reason otherwise."""
    text, where = _answer(reply)
    try:
        data: Any = extract_json(text, kind="object")
    except JSONNotFound:
        data = None
    if not (isinstance(data, dict) and "scores" in data):
        scores = complete_items(text, "scores")  # cut off after every score's object closed: the scores stand
        if scores:
            data = {"scores": scores}
    try:
        if data is None:
            others = [c.name for c in reply.tool_calls if c.name != score_prompts.SUBMIT_REVIEW]
            called = f" (it called {', '.join(others)})" if others else ""
            raise ValueError(f"no JSON object in {where}{called}")
        return validate_submission(data, dims)
    except ValueError as exc:
        if reply.finish_reason == "length":  # what was read is a fragment: say why, so the repair is shorter
            raise ValueError(f"the reply was cut off at its token limit before the scores were complete; keep "
                             f"each reasoning to a sentence or two ({exc})") from None
        raise


def _answer(reply: ChatReply) -> tuple[str, str]:
    """The text the answer is in (``submit_review``'s arguments, else the reply's content) and what to call it."""
    call = next((c for c in reply.tool_calls if c.name == score_prompts.SUBMIT_REVIEW), None)
    if call is not None:
        return call.arguments, "submit_review arguments"
    return reply.content or "", "the reply"


def _kept_scores(reply: ChatReply, dims: Sequence[Dim]) -> Submission | None:
    """The scores whose objects were complete in a reply cut off at its token limit inside its ``scores``
    array, or None (not cut off, nothing complete, or a complete object that does not validate)."""
    if reply.finish_reason != "length":
        return None
    items = complete_items(_answer(reply)[0], "scores")
    named = {dim_key(i["dimension"]) for i in items if isinstance(i.get("dimension"), str)}
    done = [d for d in dims if d.key in named]
    if not done:
        return None
    try:
        return validate_submission({"scores": items}, done)
    except ValueError:
        return None


def _weighted(sub: Submission, reply: ChatReply) -> tuple[Submission, str]:
    """The submission with each score replaced by its distribution's mean where the reply's log-probabilities
    give one, and which kind of score it holds."""
    dists = score_distributions(reply.logprobs, [v for _, v in sub.written])
    by_dim = {name: d for (name, _), d in zip(sub.written, dists, strict=True) if name is not None and d is not None}
    scores = [replace(s, score=by_dim[s.dimension].mean, sampled=s.score, dist=by_dim[s.dimension].to_json())
              if s.dimension in by_dim else s for s in sub.scores]
    source = "sampled" if not by_dim else "probability" if len(by_dim) == len(scores) else "mixed"
    return replace(sub, scores=scores), source


def _source(sources: Sequence[str]) -> str:
    return sources[0] if len(set(sources)) == 1 else "mixed"


def _cited(sub: Submission, ctx: ReviewContext, seat: Seat) -> Submission:
    ids = {i.id for i in seat.evidence.items}
    output = ctx.timeline + (ctx.output or "")
    out = []
    for s in sub.scores:
        text = s.reasoning + " " + " ".join(f"{e.get('file') or ''}:{e.get('line') or ''} {e.get('note') or ''}"
                                            if e.get("line") else f"{e.get('file') or ''} {e.get('note') or ''}"
                                            for e in s.evidence)
        out.append(replace(s, cited=cites(text, evidence_ids=ids, files=ctx.files_changed, output=output)))
    return replace(sub, scores=out)


async def score(run: ReviewRun, ctx: ReviewContext, dims: list[Dim], analysis: str, seat: Seat) -> Submission | None:
    names = [d.name for d in dims]
    trace = run.trace
    tool = score_prompts.submit_review_tool(names)
    convo: list[dict[str, Any]] = [
        {"role": "system", "content": score_prompts.SCORING_SYSTEM},
        {"role": "user", "content": redact(score_prompts.scoring_user(
            analysis=analysis, rubric=render_rubric(dims), dim_names=names, evidence=seat.evidence_text(),
            anchors=render_anchors(ctx.anchors)))},
    ]
    for m in convo:
        run.record(2, m, strategy=STRATEGIES[0])
    logprobs = TOP_LOGPROBS if seat.logprobs else None
    provider_errors: list[LLMError] = []  # every strategy failed on the provider: an outage, not bad output
    tried = 0
    kept: Submission | None = None  # the scores a reply cut off at its token limit had finished
    sources: list[str] = []
    for strategy in STRATEGIES:
        tried += 1
        wanted = [d for d in dims if kept is None or d.name not in {k.dimension for k in kept.scores}]
        kwargs: dict[str, Any] = {"logprobs": logprobs}
        if strategy != "json_text":
            kwargs |= {"tools": [tool], "tool_choice": "required" if strategy == "forced_tool" else "auto"}
        try:
            reply = await run.chat(convo, **kwargs)
        except LLMError as exc:
            trace.strategy_errors.append(f"{strategy}: {exc.kind}: {exc.message}")
            provider_errors.append(exc)
            if exc.kind == "context_overflow":
                break  # the next strategy sends this same conversation: it cannot fit either
            continue
        msg = reply.as_message()
        run.record(2, msg, strategy=strategy)
        try:
            submission = submission_from_reply(reply, wanted)
        except ValueError as exc:
            trace.strategy_errors.append(f"{strategy}: {exc}")
            part = _kept_scores(reply, wanted)
            if part is None:
                feedback = score_prompts.retry_scoring(str(exc), [d.name for d in wanted])
            else:
                part, source = _weighted(part, reply)
                sources.append(source)
                kept = part if kept is None else merge_submissions(kept, part, dims)
                rest = [d.name for d in dims if d.name not in {k.dimension for k in kept.scores}]
                feedback = score_prompts.finish_scoring([k.dimension for k in kept.scores], rest)
            _append_rejection(run, convo, msg, reply, feedback, strategy)
            continue
        trace.strategy = strategy
        weighted, source = _weighted(submission, reply)
        trace.score_source = _source([*sources, source])
        if kept is not None:
            weighted = merge_submissions(kept, weighted, dims)
        return await _with_evidence(run, ctx, dims, seat, convo, msg, reply, weighted, kwargs)
    if provider_errors and len(provider_errors) == tried:
        raise provider_errors[-1]
    return None


def _append_rejection(run: ReviewRun, convo: list[dict[str, Any]], msg: dict[str, Any], reply: ChatReply,
                      feedback: str, strategy: str) -> None:
    """The rejected answer and the reason, so the next request can go on from them."""
    convo.append(replayable(msg))  # malformed arguments sent back would make the server refuse the repair
    if reply.tool_calls:  # every tool call needs its answer before the conversation can go on
        for c in reply.tool_calls:
            text = feedback if c.name == score_prompts.SUBMIT_REVIEW else \
                f"Error: only {score_prompts.SUBMIT_REVIEW} is available"
            convo.append({"role": "tool", "tool_call_id": c.id, "content": text})
            run.record(2, convo[-1], strategy=strategy, toolName=c.name, isError=True)
    else:
        convo.append({"role": "user", "content": feedback})
        run.record(2, convo[-1], strategy=strategy)


async def _with_evidence(run: ReviewRun, ctx: ReviewContext, dims: list[Dim], seat: Seat,
                         convo: list[dict[str, Any]], msg: dict[str, Any], reply: ChatReply, sub: Submission,
                         kwargs: dict[str, Any]) -> Submission:
    """``sub`` with each score's citation checked; the uncited ones asked about once."""
    sub = _cited(sub, ctx, seat)
    uncited = [s.dimension for s in sub.scores if not s.cited]
    if uncited and (seat.evidence.items or ctx.files_changed):
        run.trace.evidence_asked = True
        _append_rejection(run, convo, msg, reply, score_prompts.ask_evidence(uncited), "evidence")
        try:
            again = await run.chat(convo, **kwargs)
            run.record(2, again.as_message(), strategy="evidence")
            second, source = _weighted(submission_from_reply(again, dims), again)
            sub = _cited(second, ctx, seat)
            run.trace.score_source = source
        except (LLMError, ValueError) as exc:  # the first answer stands, uncited
            run.trace.strategy_errors.append(f"evidence: {exc}")
    run.trace.uncited = [s.dimension for s in sub.scores if not s.cited]
    return sub
