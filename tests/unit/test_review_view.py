"""The review part of ``polpo show``: tiers, errors, per-dimension votes with outliers and crashes, samples,
stability, calibration, cache hits and cost — from a stored assessment as ``polpo.store.read`` returns it."""

from __future__ import annotations

from typing import Any

from polpo.cli.review_view import assessment_lines


def review(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "globalScore": 3.25, "rawGlobalScore": 4.0, "threshold": 3.0, "passed": True, "unscored": [],
        "samples": 2, "extraRound": True, "rerun": False, "stability": "flaky", "confidence": 0.612, "passRate": 0.5,
        "reviewerError": "fail", "calibration": {"scale": 0.75, "bias": 0.25}, "cache": {"hits": 0, "misses": 0},
        "tokens": 4200, "cost": 0.0123,
        "scores": [{"dimension": "works", "score": 3.25, "rawScore": 4.0, "weight": 1.0, "fromReviewer": 4,
                    "reasoning": "mostly works; the empty input crashes",
                    "reviewerScores": [{"reviewer": 0, "score": 4.0, "kept": True, "samples": [3, 5]},
                                       {"reviewer": 1, "score": 4.0, "kept": True, "samples": [4, 4]},
                                       {"reviewer": 2, "score": 1.0, "kept": False, "crashed": True,
                                        "why": "3 from the median 4 (more than 1.5)"}],
                    "spread": {"mean": 4.0, "median": 4.0, "std": 0.707, "votes": [3, 5, 4, 4]}}],
    }
    return {**base, **over}


def asm(**over: Any) -> dict[str, Any]:
    return {"trigger": "initial", "status": "complete", "passed": True,
            "message": "2/2 checks passed; decided by tier 'judge' (FINAL_TIER)",
            "checks": [{"idx": 0, "type": "file_exists", "label": "out.txt", "passed": 1, "message": "ok",
                        "scores": {"tier": "build"}},
                       {"idx": 1, "type": "llm_review", "label": "greets", "passed": 1, "message": "Score 3.25/5",
                        "scores": {"tier": "judge", "review": review()}}],
            "reviews": [{"check": 1, "reviewer": 0, "model": "openai/a", "ok": True, "globalScore": 3.0,
                         "strategy": "forced_tool", "filesRead": ["out.txt"], "cacheHits": 0},
                        {"check": 1, "reviewer": 2, "model": "openai/c", "ok": False, "error": "server: 503"}],
            **over}


def test_a_review_shows_votes_outliers_samples_stability_calibration_and_cost() -> None:
    lines = assessment_lines(asm(), tiers=True)
    text = "\n".join(lines)
    assert lines[0] == "    [pass] [tier build] file_exists out.txt: ok"
    assert lines[1] == "    [pass] [tier judge] llm_review greets: Score 3.25/5"
    assert ("panel: flaky, confidence 0.61, 50% of runs pass; samples 2, extra round (near the threshold); "
            "crashed reviewers vote 1; calibrated (×0.75 +0.25; raw 4.00)") in text
    assert "judge calls: 0 cache hit(s), 0 miss(es); cost $0.0123, 4200 tokens" in text
    assert ("works: 3.25/5 (raw 4.00) (weight 1); votes: r0 4 (samples 3, 5) · r1 4 (samples 4, 4) · "
            "r2 1 (crashed: counted as 1) DROPPED: 3 from the median 4 (more than 1.5)") in text
    assert "spread: mean 4.00, median 4, σ 0.71 over 4 vote(s)" in text
    assert "why, from reviewer 1 (run 4) who voted 4: mostly works; the empty input crashes" in text
    assert "reviewer 0 (openai/a): score 3.00 via forced_tool; read 1 file(s)" in text
    assert "reviewer 2 (openai/c): failed: server: 503" in text
    assert lines[-1] == "    verdict: passed — 2/2 checks passed; decided by tier 'judge' (FINAL_TIER)"


def test_without_explicit_tiers_no_tier_labels_and_an_undecided_review_says_so() -> None:
    held = asm(status="running", passed=None, message="undecided: llm_review #2: connection refused",
               checks=[{"idx": 1, "type": "llm_review", "label": "greets", "passed": 0,
                        "message": "Review could not be done", "scores": {"tier": "review", "error": {
                            "reason": "connection refused", "retryable": True}}}], reviews=[])
    lines = assessment_lines(held, tiers=False)
    assert lines == ["    [ERROR] llm_review greets: Review could not be done",
                     "    verdict: undecided: llm_review #2: connection refused"]


def test_cache_hits_are_shown() -> None:
    text = "\n".join(assessment_lines(asm(checks=[{"idx": 1, "type": "llm_review", "label": "g", "passed": 1,
                                                   "message": "m", "scores": {"review": review(
                                                       cache={"hits": 6, "misses": 0}, cost=None)}}],
                                          reviews=[{"check": 1, "reviewer": 0, "model": "m", "ok": True,
                                                    "globalScore": 4, "strategy": "forced_tool",
                                                    "cacheHits": 2}]), tiers=False))
    assert "judge calls: 6 cache hit(s), 0 miss(es); cost unknown" in text
    assert "; 2 cached answer(s)" in text


def test_a_dispute_says_only_the_judges_own_code_is_against_the_work_and_the_score_before_it() -> None:
    cap = {"cap": 2.5, "items": ["E3"], "why": "the work disagrees with the judge's own implementation (E3)"}
    code = "def f(x):\n" + "".join(f"    y{i} = {i}\n" for i in range(40)) + "    return x\n"
    disputed = review(evidenceCap={**cap, "disputed": True}, disputedScore=4.91, decision="person",
                      decisionReason="the work and the judge's own code disagree",
                      probe={"function": "f", "code": code, "usable": True})
    text = "\n".join(assessment_lines(asm(checks=[{"idx": 1, "type": "llm_review", "label": "greets", "passed": 0,
                                                   "scores": {"review": disputed}}]), tiers=False))
    assert "score bounded at 2.5 by the evidence: the work disagrees" in text
    assert "a dispute: only the judge's own code is against the work" in text and "without it: 4.91" in text
    assert "a person must decide: the work and the judge's own code disagree" in text
    assert "the judge's own f:" in text and "  | def f(x):" in text and "  |     y28 = 28" in text
    assert "y29 = 29" not in text and "… 12 more line(s) in the review (polpo show --json)" in text
    fact = review(evidenceCap={**cap, "cap": 2.0, "disputed": False})
    text = "\n".join(assessment_lines(asm(checks=[{"idx": 1, "type": "llm_review", "label": "greets", "passed": 0,
                                                   "scores": {"review": fact}}]), tiers=False))
    assert "score bounded at 2 by the evidence" in text and "a dispute" not in text
