"""A scripted judge for daemon-level tests: a FakeLLM responder that plays every judge role by request shape.

Reviewers run concurrently, so a fixed reply order would race; this responder looks at each request instead:

* dimension generation (its system prompt) → ``dimensions`` as JSON (or invalid text when ``bad_dimensions``);
* phase 1 with tools → a plain analysis (no tool call), which ends exploration at once;
* phase 1 without tools (output review) → the same analysis;
* phase 2 (``submit_review`` offered) → a ``submit_review`` call scoring every requested dimension with
  ``score`` (or ``scores[dimension]``);
* the expectation judge → ``judge_reply`` (default: no correction).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from polpo.review import prompts
from tests.support.fake_llm import RecordedRequest, Reply, text, tool_call, tool_calls


@dataclass
class ScriptedJudge:
    score: float = 4.0
    scores: dict[str, float] = field(default_factory=dict)
    score_for: Callable[[RecordedRequest], float] | None = None
    dimensions: list[dict[str, Any]] | None = None
    judge_reply: str = '{"corrections": []}'
    calls: dict[str, int] = field(default_factory=dict)

    def __call__(self, req: RecordedRequest) -> Reply:
        kind = phase(req)
        self.calls[kind] = self.calls.get(kind, 0) + 1
        if kind == "dimensions":
            return text(json.dumps({"dimensions": self.dimensions or [
                {"name": "works", "weight": 0.6, "description": "It does what was asked"},
                {"name": "clear", "weight": 0.4, "description": "It is easy to read"},
                {"name": "complete", "weight": 0.2, "description": "Nothing is missing"}]}))
        if kind == "judge":
            return text(self.judge_reply)
        if kind in ("forced", "auto", "json"):
            names = requested_dimensions(req)
            base = self.score_for(req) if self.score_for else self.score
            payload = {"scores": [{"dimension": n, "score": self.scores.get(n, base), "reasoning": f"{n} looks ok",
                                   "evidence": []} for n in names], "summary": "scripted review"}
            if kind == "json":
                return text(json.dumps(payload))
            return tool_call(prompts.SUBMIT_REVIEW, payload)
        return text("analysis: the work was inspected; evidence at out.txt:1")


def phase(req: Mapping[str, Any]) -> str:
    tools = {t["function"]["name"] for t in req.get("tools") or []}
    if "read_file" in tools:
        return "explore"
    if prompts.SUBMIT_REVIEW in tools:
        return "forced" if isinstance(req.get("tool_choice"), dict) else "auto"
    system = req["messages"][0]["content"]
    return {prompts.JSON_SCORER_SYSTEM: "json", prompts.REVIEW_OUTPUT_SYSTEM: "output",
            prompts.DIMENSIONS_SYSTEM: "dimensions", prompts.JUDGE_SYSTEM: "judge"}.get(system, "agent")


def requested_dimensions(req: Mapping[str, Any]) -> list[str]:
    """The dimension names the scoring request asks for (from the submit_review schema, else the prompt)."""
    for t in req.get("tools") or []:
        if t["function"]["name"] == prompts.SUBMIT_REVIEW:
            props = t["function"]["parameters"]["properties"]["scores"]["items"]["properties"]
            enum = props["dimension"].get("enum")
            if enum:
                return list(enum)
    body = " ".join(str(m.get("content") or "") for m in req["messages"])
    known = ["correctness", "completeness", "code_quality", "edge_cases", "works", "clear", "complete"]
    return [n for n in known if n in body] or ["correctness"]


# ------------------------------------------------------------------------------------------------ heuristic

QUALITY_MARKERS = ("return ", "[::-1]", '"""', "->")
"""What :func:`marker_score` looks for: a value returned, the idiomatic slice, a docstring, type hints."""
_FILES_HEADER = "FILES THE AGENT CREATED OR CHANGED:\n"
_OUTPUT_HEADER = "EXECUTION TIMELINE, OUTPUT, STDERR AND OUTCOMES:\n"


def marker_score(text: str) -> int:
    """1 plus one per quality marker present, at most 5: a judge whose scores follow the work, deterministically."""
    return min(5, 1 + sum(1 for m in QUALITY_MARKERS if m in text))


@dataclass
class HeuristicJudge:
    """A judge that actually looks at the work: the output (or the files it reads) is echoed into its analysis
    between ``<<<`` and ``>>>``, and the score of every dimension is :func:`marker_score` of that analysis, plus
    ``offsets[model]`` (clamped to 1..5) so reviewers can disagree."""

    offsets: dict[str, int] = field(default_factory=dict)

    def __call__(self, req: RecordedRequest) -> Reply:
        kind = phase(req)
        user = str(req["messages"][1]["content"]) if len(req["messages"]) > 1 else ""
        if kind == "explore":
            results = [str(m.get("content") or "") for m in req["messages"] if m["role"] == "tool"]
            if results or _FILES_HEADER not in user:
                return text("analysis: <<<" + "\n".join(results) + ">>>")
            listed = user.split(_FILES_HEADER, 1)[1].split("\n\n", 1)[0]
            paths = [ln[2:] for ln in listed.splitlines() if ln.startswith("- ")][:5]
            return tool_calls([("read_file", {"path": p}) for p in paths])
        if kind == "output":
            body = user.split(_OUTPUT_HEADER, 1)[-1].split("\n\nEVALUATION DIMENSIONS:", 1)[0]
            return text(f"analysis: <<<{body}>>>")
        if kind in ("forced", "auto", "json"):
            convo = " ".join(str(m.get("content") or "") for m in req["messages"])
            seen = convo.split("<<<", 1)[-1].split(">>>", 1)[0] if "<<<" in convo else ""
            model = str(req.get("model", "")).split("/")[-1]
            score = max(1, min(5, marker_score(seen) + self.offsets.get(model, 0)))
            payload = {"scores": [{"dimension": n, "score": score, "reasoning": f"{n}: {score}", "evidence": []}
                                  for n in requested_dimensions(req)], "summary": f"markers give {score}"}
            return text(json.dumps(payload)) if kind == "json" else tool_call(prompts.SUBMIT_REVIEW, payload)
        return ScriptedJudge()(req)
