"""OpenTelemetry spans built from the events: mission → task → attempt → check → reviewer call.

Each span starts and ends at the timestamps of the events that open and close it, so a trace shows what the
event log says. A reviewer span is made from the stored trace of that reviewer (model, tokens, cost, its score,
whether it answered), read after the check's ``assessment:check:complete``; it ends when the panel's traces
were stored and lasts the reviewer's own duration. After a restart, a span whose opening event happened before
it is started when the next event of its mission, task or attempt arrives (``polpo.resumed`` = true).
Needs only ``opentelemetry-api``; :mod:`polpo.telemetry.otel` sets up the SDK and the exporter.
"""

from __future__ import annotations

from typing import Any

import anyio
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from polpo.events.catalog import Event
from polpo.telemetry.follow import ReviewQueue, ReviewsFn, attempt_end, ts_seconds
from polpo.telemetry.genai import agent_call_spans

__all__ = ["EventSpans"]


def _ns(ts: str) -> int:
    return int(ts_seconds(ts) * 1e9)


class EventSpans:
    def __init__(self, tracer: Tracer, reviews: ReviewsFn, transcripts: ReviewsFn | None = None) -> None:
        """``transcripts``: (task id, attempt number) → the attempt's stored transcript, for the LLM agent's
        ``chat`` and ``execute_tool`` spans (:mod:`polpo.telemetry.genai`); None: no such spans."""
        self.tracer = tracer
        self.missions: dict[str, Span] = {}
        self.tasks: dict[str, Span] = {}
        self.attempts: dict[str, Span] = {}
        self.checks: dict[tuple[str, int], Span] = {}
        self.scores: dict[str, float] = {}
        self.pending_reviews: dict[tuple[str, int], Span] = {}  # ended check spans whose reviewers are to come
        self.review_queue = ReviewQueue(reviews, self._reviewers)
        self.pending_agents: dict[tuple[str, int], Span] = {}  # attempt spans whose agent calls are to come
        self.agent_queue = ReviewQueue(transcripts, self._agent_calls) if transcripts is not None else None

    async def run(self) -> None:
        if self.agent_queue is None:
            await self.review_queue.run()
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.review_queue.run)
            tg.start_soon(self.agent_queue.run)

    # -- spans, started lazily after a restart ---------------------------------------------------------------
    def _start(self, name: str, parent: Span | None, at: int, attrs: dict[str, Any]) -> Span:
        ctx = trace.set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(name, context=ctx, start_time=at, attributes=attrs)

    def _mission(self, mid: str, at: int) -> Span:
        span = self.missions.get(mid)
        if span is None:
            span = self.missions[mid] = self._start(f"mission {mid}", None, at,
                                                     {"polpo.mission.id": mid, "polpo.resumed": True})
        return span

    def _task(self, ev: Event, at: int, resumed: bool = True) -> Span:
        tid = ev.task_id or ""
        span = self.tasks.get(tid)
        if span is None:
            attrs: dict[str, Any] = {"polpo.task.id": tid, "polpo.mission.id": ev.mission_id or ""}
            if resumed:
                attrs["polpo.resumed"] = True
            span = self.tasks[tid] = self._start(f"task {tid}", self._mission(ev.mission_id or "", at), at, attrs)
        return span

    def _attempt(self, ev: Event, at: int) -> Span:
        tid = ev.task_id or ""
        span = self.attempts.get(tid)
        if span is None:
            span = self.attempts[tid] = self._start("attempt", self._task(ev, at), at,
                                                     {"polpo.task.id": tid, "polpo.resumed": True})
        return span

    # -- the events -------------------------------------------------------------------------------------------
    def observe(self, ev: Event) -> None:
        name, d = ev.event, ev.data
        if name == "mission:accepted" and ev.mission_id:
            self.missions[ev.mission_id] = self._start(
                f"mission {d.get('name')}", None, _ns(ev.ts),
                {"polpo.mission.id": ev.mission_id, "polpo.mission.name": str(d.get("name")),
                 "polpo.mission.tasks": int(d.get("taskCount") or 0), "polpo.mission.file": str(d.get("file"))})
        elif name == "mission:completed" and ev.mission_id:
            span = self.missions.pop(ev.mission_id, None) or self._mission(ev.mission_id, _ns(ev.ts))
            quality = (d.get("report") or {}).get("quality") or {}
            span.set_attribute("polpo.outcome", str(d.get("outcome")))
            if isinstance(quality.get("average"), int | float):
                span.set_attribute("polpo.quality.average", quality["average"])
            if d.get("outcome") != "completed":
                span.set_status(Status(StatusCode.ERROR, f"mission {d.get('outcome')}"))
            span.end(_ns(ev.ts))
        elif ev.task_id is None:
            return
        elif name == "task:transition":
            self._transition(ev, d, _ns(ev.ts))
        elif name == "agent:spawned":
            span = self._attempt(ev, _ns(ev.ts))
            span.set_attribute("polpo.agent", str(d.get("agentName")))
            if d.get("model"):
                span.set_attribute("gen_ai.request.model", str(d["model"]))
        elif name == "agent:finished":
            span = self._attempt(ev, _ns(ev.ts))
            if d.get("exitCode") is not None:
                span.set_attribute("polpo.agent.exit_code", int(d["exitCode"]))
            span.set_attribute("polpo.agent.timed_out", bool(d.get("timedOut")))
            if isinstance(d.get("duration"), int | float):
                span.set_attribute("polpo.agent.duration_s", float(d["duration"]))
            if d.get("model") and self.agent_queue is not None and isinstance(d.get("attempt"), int):
                self.pending_agents[(ev.task_id, d["attempt"])] = span
                self.agent_queue.put(ev.task_id, d["attempt"])
        elif name == "assessment:check:started":
            at = _ns(ev.ts)
            self.checks[(ev.task_id, int(d.get("index") or 0))] = self._start(
                f"check {d.get('type')}", self._attempt(ev, at), at,
                {"polpo.check.type": str(d.get("type")), "polpo.check.label": str(d.get("label")),
                 "polpo.check.index": int(d.get("index") or 0)})
        elif name == "assessment:check:complete":
            self._check_complete(ev, d)
        elif name == "assessment:complete" and isinstance(d.get("globalScore"), int | float):
            self.scores[ev.task_id] = d["globalScore"]
            self._attempt(ev, _ns(ev.ts)).set_attribute("polpo.score", d["globalScore"])

    def _transition(self, ev: Event, d: dict[str, Any], at: int) -> None:
        tid = ev.task_id or ""
        old, new = d.get("from"), d.get("to")
        if new == "assigned" and d.get("trigger") == "dispatch":
            task = self._task(ev, at, resumed=False)
            task.set_attribute("polpo.agent", str(d.get("agent")))
            self.attempts[tid] = self._start(
                f"attempt {d.get('attempt')} ({d.get('kind')})", task, at,
                {"polpo.task.id": tid, "polpo.attempt": int(d.get("attempt") or 0), "polpo.attempt.kind":
                 str(d.get("kind")), "polpo.agent": str(d.get("agent"))})
        elif tid in self.attempts and (verdict := attempt_end(old, new)) is not None:
            span = self.attempts.pop(tid)
            span.set_attribute("polpo.verdict", verdict)
            if verdict != "passed":
                span.set_status(Status(StatusCode.ERROR, str(d.get("reason") or verdict)))
            span.end(at)
        if new in ("done", "failed"):
            ended = self.tasks.pop(tid, None) or self._task(ev, at)
            ended.set_attribute("polpo.task.status", str(new))
            score = self.scores.pop(tid, None)
            if score is not None:
                ended.set_attribute("polpo.score", score)
            if new == "failed":
                ended.set_status(Status(StatusCode.ERROR, str(d.get("reason") or "failed")))
            ended.end(at)

    def _check_complete(self, ev: Event, d: dict[str, Any]) -> None:
        tid, idx, at = ev.task_id or "", int(d.get("index") or 0), _ns(ev.ts)
        span = self.checks.pop((tid, idx), None)
        if span is None:
            span = self._start(f"check {d.get('type')}", self._attempt(ev, at), at,
                               {"polpo.check.type": str(d.get("type")), "polpo.resumed": True})
        span.set_attribute("polpo.check.passed", bool(d.get("passed")))
        span.set_attribute("polpo.verdict", "passed" if d.get("passed") else "failed")
        if isinstance(d.get("globalScore"), int | float):
            span.set_attribute("polpo.score", d["globalScore"])
        if not d.get("passed"):
            span.set_status(Status(StatusCode.ERROR, str(d.get("message") or "failed")[:200]))
        span.end(at)
        if d.get("type") == "llm_review":
            self.pending_reviews[(tid, idx)] = span
            self.review_queue.put(tid, idx)

    def _agent_calls(self, task_id: str, number: int, turns: list[dict[str, Any]]) -> None:
        span = self.pending_agents.pop((task_id, number), None)
        if span is not None:
            agent_call_spans(self.tracer, span, turns)

    def _reviewers(self, task_id: str, check_idx: int, traces: list[dict[str, Any]]) -> None:
        check = self.pending_reviews.pop((task_id, check_idx), None)
        for t in traces:
            data = t["data"]
            end = _ns(t["at"])
            start = end - int(float(data.get("duration") or 0) * 1e9)
            attrs: dict[str, Any] = {"gen_ai.operation.name": "review", "gen_ai.request.model": str(t["model"]),
                                     "polpo.reviewer.index": int(t["reviewer"]), "polpo.reviewer.ok": bool(t["ok"]),
                                     "polpo.tokens": int(data.get("tokens") or 0),
                                     "polpo.verdict": "scored" if t["ok"] else "failed"}
            if isinstance(data.get("cost"), int | float):
                attrs["polpo.cost_usd"] = float(data["cost"])
            if isinstance(data.get("globalScore"), int | float):
                attrs["polpo.score"] = float(data["globalScore"])
            span = self._start(f"reviewer {t['reviewer']} {t['model']}", check, start, attrs)
            if not t["ok"]:
                span.set_status(Status(StatusCode.ERROR, str(data.get("error") or "no review")[:200]))
            span.end(end)
