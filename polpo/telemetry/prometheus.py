"""``GET /metrics``: the daemon's numbers in the Prometheus text format (prometheus-client).

Counters and histograms count what this process has seen since it started (Prometheus handles the reset of a
restart); the gauges are read when scraped: tasks of open missions by status from the engine's board, the
ready queue, the running tasks. A registry of its own per daemon, so two daemons in one process (tests) do not
share numbers. Names and labels are listed in docs/reference/metrics.md, generated from this registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from polpo.events.catalog import Event
from polpo.telemetry.follow import Follow, ReviewQueue, ReviewsFn, ts_seconds

__all__ = ["Metrics"]

DURATION_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)
SCORE_BUCKETS = (1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5)


JUDGE_CHECK = -1  # the check index the expectation judge's trace is stored under


def _as_float(fn: Callable[[], int]) -> Callable[[], float]:
    return lambda: float(fn())


class _TasksByStatus(Collector):
    def __init__(self, counts: Callable[[], Mapping[str, int]]) -> None:
        self.counts = counts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        g = GaugeMetricFamily("polpo_tasks", "Tasks of running and cancelling missions, by status",
                              labels=["status"])
        for status, n in sorted(self.counts().items()):
            g.add_metric([status], n)
        yield g


class Metrics:
    def __init__(self, *, version: str, tasks_by_status: Callable[[], Mapping[str, int]],
                 queue_depth: Callable[[], int], running: Callable[[], int], missions_running: Callable[[], int],
                 stream_clients: Callable[[], int], reviews: ReviewsFn) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # no *_created series (Prometheus needs none)
        r = self.registry = CollectorRegistry()
        Gauge("polpo_info", "The daemon's version", ["version"], registry=r).labels(version).set(1)
        r.register(_TasksByStatus(tasks_by_status))
        for name, doc, fn in (("polpo_queue_depth", "Tasks ready to start, waiting for a slot", queue_depth),
                              ("polpo_running_tasks", "Tasks whose attempt (agent or checks) is running", running),
                              ("polpo_missions_running", "Missions running or cancelling", missions_running),
                              ("polpo_http_stream_clients", "Clients following /api/events/stream", stream_clients)):
            Gauge(name, doc, registry=r).set_function(_as_float(fn))
        self.events = Counter("polpo_events", "Events written, by name", ["event"], registry=r)
        self.missions_accepted = Counter("polpo_missions_accepted", "Mission files accepted", registry=r)
        self.missions_rejected = Counter("polpo_missions_rejected", "Mission files rejected", registry=r)
        self.missions_finished = Counter("polpo_missions_finished", "Missions finished, by outcome", ["outcome"],
                                         registry=r)
        self.tasks_finished = Counter("polpo_tasks_finished", "Tasks finished, by status (done | failed)",
                                      ["status"], registry=r)
        self.task_seconds = Histogram("polpo_task_duration_seconds", "First dispatch to done or failed",
                                      buckets=DURATION_BUCKETS, registry=r)
        self.attempts = Counter("polpo_attempts", "Attempts by kind (initial | fix | retry) and outcome "
                                "(passed | failed | interrupted)", ["kind", "outcome"], registry=r)
        self.attempt_seconds = Histogram("polpo_attempt_duration_seconds", "Dispatch to verdict (agent and checks)",
                                         ["kind"], buckets=DURATION_BUCKETS, registry=r)
        self.checks = Counter("polpo_checks", "Checks run, by type and outcome (passed | failed | undecided: the "
                              "judge could not tell, a person decides)", ["type", "outcome"], registry=r)
        self.scores = Histogram("polpo_assessment_score", "Scores of scored checks (1-5), by check type",
                                ["check_type"], buckets=SCORE_BUCKETS, registry=r)
        self.judge_calls = Counter("polpo_judge_reviews", "Reviewer runs of the judge panel, by model and outcome",
                                   ["model", "outcome"], registry=r)
        self.judge_tokens = Counter("polpo_judge_tokens", "Tokens used by the judge panel's reviewers, by model",
                                    ["model"], registry=r)
        self.judge_cost = Counter("polpo_judge_cost_usd", "Cost of the judge panel's reviewers (USD), by model",
                                  ["model"], registry=r)
        self.llm_tokens = Counter("polpo_llm_tokens", "Tokens of polpo's LLM calls, by model, kind (input | output) "
                                  "and role (agent | reviewer | judge)", ["model", "kind", "role"], registry=r)
        self.llm_cost = Counter("polpo_llm_cost_usd", "Cost of polpo's LLM calls (USD; calls of a model with no "
                                "known price count in tokens only), by model and role", ["model", "role"], registry=r)
        self.sla = Counter("polpo_sla_events", "SLA warnings, violations and deadlines met", ["kind"], registry=r)
        self.notify_failed = Counter("polpo_notification_failures", "Notifications that could not be delivered",
                                     ["channel"], registry=r)
        self.notify_sent = Counter("polpo_notifications_sent", "Notifications delivered", ["channel"], registry=r)
        self.mcp_calls = Counter("polpo_mcp_calls", "LLM agents' MCP tool calls, by server and outcome (ok | error)",
                                 ["server", "outcome"], registry=r)
        self.mcp_seconds = Counter("polpo_mcp_call_seconds", "Time in LLM agents' MCP tool calls, by server",
                                   ["server"], registry=r)
        self.questions = Counter("polpo_questions", "Questions agents asked a person, by source (ask_human | "
                                 "output: a command agent's)", ["source"], registry=r)
        self.answers = Counter("polpo_answers", "Answers to agents' questions, by who gave them (person | model | "
                               "timeout)", ["source"], registry=r)
        self.tool_approvals = Counter("polpo_tool_approvals", "Tool calls that waited for a person (approve_tools), "
                                      "by how it ended (approved | rejected | timeout)", ["status"], registry=r)
        self.follow = Follow()
        self._event_counters: dict[str, Any] = {}  # name -> its labelled child: labels() costs more than inc()
        self.review_queue = ReviewQueue(reviews, self._reviews)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    async def run(self) -> None:
        """Reads the review traces after each review check (in the daemon's task group, until cancelled)."""
        await self.review_queue.run()

    def observe(self, ev: Event) -> None:
        """A store subscriber: a few dictionary lookups per event."""
        name, d = ev.event, ev.data
        counter = self._event_counters.get(name)
        if counter is None:
            counter = self._event_counters[name] = self.events.labels(name)
        counter.inc()
        if name == "task:transition" and ev.task_id is not None:
            ended, task_seconds = self.follow.transition(ev.task_id, d, ts_seconds(ev.ts))
            if ended is not None:
                self.attempts.labels(ended.kind, ended.outcome).inc()
                if ended.seconds is not None:
                    self.attempt_seconds.labels(ended.kind).observe(ended.seconds)
            if d.get("to") in ("done", "failed"):
                self.tasks_finished.labels(d["to"]).inc()
                if task_seconds is not None:
                    self.task_seconds.observe(task_seconds)
        elif name == "assessment:check:complete":
            check_type = str(d.get("type"))
            outcome = "undecided" if d.get("undecided") else "passed" if d.get("passed") else "failed"
            self.checks.labels(check_type, outcome).inc()
            if isinstance(d.get("globalScore"), int | float):
                self.scores.labels(check_type).observe(d["globalScore"])
            if check_type == "llm_review" and ev.task_id is not None and isinstance(d.get("index"), int):
                self.review_queue.put(ev.task_id, d["index"])
        elif name == "agent:finished":
            if d.get("model") is not None:
                self._spend(str(d["model"]), "agent", d)
            for server, c in (d.get("mcp") or {}).items():
                self._mcp(str(server), c)
        elif name == "question:asked":
            self.questions.labels(str(d.get("source"))).inc()
        elif name == "question:answered":
            self.answers.labels(str(d.get("source"))).inc()
        elif name == "approval:resolved" and d.get("tool"):
            self.tool_approvals.labels(str(d.get("status"))).inc()
        elif (name == "assessment:judged" and not d.get("skipped")) or name == "assessment:corrected":
            if ev.task_id is not None:
                self.review_queue.put(ev.task_id, JUDGE_CHECK)
        elif name == "mission:accepted":
            self.missions_accepted.inc()
        elif name == "mission:rejected":
            self.missions_rejected.inc()
        elif name == "mission:completed":
            self.missions_finished.labels(str(d.get("outcome"))).inc()
        elif name.startswith("sla:"):
            self.sla.labels(name[4:]).inc()
        elif name == "notification:failed":
            self.notify_failed.labels(str(d.get("channel"))).inc()
        elif name == "notification:sent":
            self.notify_sent.labels(str(d.get("channel"))).inc()

    def _spend(self, model: str, role: str, d: Mapping[str, Any]) -> None:
        for kind, key in (("input", "tokensIn"), ("output", "tokensOut")):
            if isinstance(d.get(key), int) and d[key]:
                self.llm_tokens.labels(model, kind, role).inc(d[key])
        if isinstance(d.get("cost"), int | float):
            self.llm_cost.labels(model, role).inc(d["cost"])

    def _mcp(self, server: str, c: Mapping[str, Any]) -> None:
        calls, errors = int(c.get("calls") or 0), int(c.get("errors") or 0)
        if calls - errors > 0:
            self.mcp_calls.labels(server, "ok").inc(calls - errors)
        if errors:
            self.mcp_calls.labels(server, "error").inc(errors)
        if isinstance(c.get("seconds"), int | float):
            self.mcp_seconds.labels(server).inc(c["seconds"])

    def _reviews(self, task_id: str, check_idx: int, traces: list[dict[str, Any]]) -> None:
        for t in traces:
            data = t["data"]
            model = str(t.get("model") or data.get("model"))
            if check_idx == JUDGE_CHECK:  # the expectation judge's one call, not a panel seat
                self._spend(model, "judge", data)
                continue
            self._spend(model, "reviewer", data)
            self.judge_calls.labels(model, "ok" if t.get("ok") else "failed").inc()
            if isinstance(data.get("tokens"), int):
                self.judge_tokens.labels(model).inc(data["tokens"])
            if isinstance(data.get("cost"), int | float):
                self.judge_cost.labels(model).inc(data["cost"])
