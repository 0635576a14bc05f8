"""A scripted judge for daemon-level tests: a FakeLLM responder that plays every judge role by request shape.

Reviewers run concurrently, so a fixed reply order would race; this responder looks at each request instead:

* dimension generation (its system prompt) → ``dimensions`` as JSON (or invalid text when ``bad_dimensions``);
* phase 1 with tools → a plain analysis (no tool call), which ends exploration at once;
* phase 1 without tools (output review) → the same analysis;
* phase 2 (the scores as JSON text first, then ``submit_review`` offered) → every requested dimension scored
  ``score`` (or ``scores[dimension]``): JSON text, or a ``submit_review`` call when the tool is offered;
* a checklist → every question answered ``answer`` (default yes), citing the first evidence item;
* the expectation judge → ``judge_reply`` (default: no correction).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polpo.review import prompts, score_prompts
from tests.support.fake_llm import RecordedRequest, Reply, text, tool_call, tool_calls


@dataclass
class ScriptedJudge:
    score: float = 4.0
    scores: dict[str, float] = field(default_factory=dict)
    score_for: Callable[[RecordedRequest], float] | None = None
    dimensions: list[dict[str, Any]] | None = None
    judge_reply: str = '{"corrections": []}'
    answer: str = "yes"
    cite: str = ""
    """Evidence items each score's reasoning names (``"E1"``); none by default, so a panel with evidence asks once."""
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
        if kind == "checklist":
            asked = sum(1 for line in req["messages"][1]["content"].splitlines() if re.match(r"Q\d+\. ", line))
            return text(json.dumps({"answers": [{"question": i, "evidence": "E1", "answer": self.answer}
                                                for i in range(1, asked + 1)]}))
        if kind in ("forced", "auto", "json"):
            names = requested_dimensions(req)
            base = self.score_for(req) if self.score_for else self.score
            payload = {"scores": [{"dimension": n, "reasoning": f"{n} looks ok (out.txt:1){' ' + self.cite if self.cite else ''}",
                                   "score": self.scores.get(n, base), "evidence": []} for n in names],
                       "summary": "scripted review"}
            if kind == "json":
                return text(json.dumps(payload))
            return tool_call(score_prompts.SUBMIT_REVIEW, payload)
        return text("analysis: the work was inspected; evidence at out.txt:1")


def phase(req: Mapping[str, Any]) -> str:
    tools = {t["function"]["name"] for t in req.get("tools") or []}
    if "read_file" in tools:
        return "explore"
    if score_prompts.SUBMIT_REVIEW in tools:
        return "forced" if req.get("tool_choice") == "required" or isinstance(req.get("tool_choice"), dict) \
            else "auto"
    system = req["messages"][0]["content"]
    return {score_prompts.SCORING_SYSTEM: "json", prompts.REVIEW_OUTPUT_SYSTEM: "output",
            score_prompts.CHECKLIST_SYSTEM: "checklist", prompts.DIMENSIONS_SYSTEM: "dimensions",
            prompts.JUDGE_SYSTEM: "judge"}.get(system, "agent")


def requested_dimensions(req: Mapping[str, Any]) -> list[str]:
    """The dimension names the scoring request asks for (from the submit_review schema, else the prompt)."""
    for t in req.get("tools") or []:
        if t["function"]["name"] == score_prompts.SUBMIT_REVIEW:
            props = t["function"]["parameters"]["properties"]["scores"]["items"]["properties"]
            enum = props["dimension"].get("enum")
            if enum:
                return list(enum)
    body = " ".join(str(m.get("content") or "") for m in req["messages"])
    asked = body.rsplit("Score each of these dimensions: ", 1)
    if len(asked) == 2:  # the scoring prompt names them, in order
        return [n.strip() for n in asked[1].split(".", 1)[0].split(",") if n.strip()]
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
            payload = {"scores": [{"dimension": n, "reasoning": f"{n}: markers in the work (work.py:1)", "score": score,
                                   "evidence": []} for n in requested_dimensions(req)],
                       "summary": f"markers give {score}"}
            return text(json.dumps(payload)) if kind == "json" else tool_call(score_prompts.SUBMIT_REVIEW, payload)
        return ScriptedJudge()(req)


def rule_calibration(folder: Path, pass_at: float = 4.0, fail_below: float = 2.0) -> Path:
    """A ``[judge] calibration`` file holding a rule (:mod:`polpo.review.rule`) and the identity map: a raw score
    at or above ``pass_at`` passes, one below ``fail_below`` fails, and one between goes to a person."""
    path = folder / "calibration.json"
    path.write_text(json.dumps({"scale": 1, "bias": 0, "rule": {"passAt": pass_at, "failBelow": fail_below,
                                                                "maxFalsePass": 0.05, "maxFalseFail": 0.2}}))
    return path
