"""Expectation judge, pure part: which proposed corrections are applied, and how."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from polpo.assessment.judge import apply_corrections, plan_corrections

EXPS: list[dict[str, Any]] = [
    {"type": "test", "command": "npm test -- --grep users"},
    {"type": "file_exists", "paths": ["src/routes/users.ts"]},
    {"type": "llm_review", "criteria": "good API", "threshold": 4.5},
    {"type": "script", "command": "./validate.sh", "expectExitCode": 0, "timeout": "PT30S"},
    {"type": "file_exists", "path": "dist/index.js"},
    {"type": "test", "command": "pytest", "confidence": "firm"},
]


def fix(index: int | None, verdict: str = "expectation_wrong", reason: str = "because", **f: Any) -> dict[str, Any]:
    p: dict[str, Any] = {"verdict": verdict, "reason": reason, "fix": f}
    if index is not None:
        p["index"] = index
    return p


def test_command_correction_applied_and_input_untouched() -> None:
    before = copy.deepcopy(EXPS)
    new, applied = apply_corrections(EXPS, [fix(0, command='npm test -- --grep "user management"')])
    assert before == EXPS
    assert new[0] == {"type": "test", "command": 'npm test -- --grep "user management"'}
    assert new[1:] == EXPS[1:]
    (c,) = applied
    assert (c.index, c.type, c.field, c.old, c.reason) == (0, "test", "command", "npm test -- --grep users", "because")
    assert c.to_json()["new"] == 'npm test -- --grep "user management"'


def test_script_keeps_its_other_fields() -> None:
    new, applied = apply_corrections(EXPS, [fix(3, command="bash validate.sh")])
    assert new[3] == {"type": "script", "command": "bash validate.sh", "expectExitCode": 0, "timeout": "PT30S"}
    assert len(applied) == 1


def test_file_paths_corrected_in_either_shape() -> None:
    new, applied = apply_corrections(EXPS, [fix(1, paths=["src/api/users.ts"]), fix(4, path="build/index.js")])
    assert new[1] == {"type": "file_exists", "paths": ["src/api/users.ts"]}
    assert new[4] == {"type": "file_exists", "path": "build/index.js"}
    assert [c.field for c in applied] == ["paths", "path"]
    new, _ = apply_corrections(EXPS, [fix(4, paths=["a.js", "b.js"])])
    assert new[4] == {"type": "file_exists", "paths": ["a.js", "b.js"]}  # switching shape keeps it valid


@pytest.mark.parametrize(
    ("original", "proposed", "expected"),
    [
        (4.5, 3.5, 3.5),
        (4.5, 4.0, 4.0),
        (4.5, 2.0, 3.5),  # clamped: at most 1.0 lower
        (3.0, 1.0, 2.5),  # clamped: never below the floor
        (3.2, 2.6, 2.6),
    ],
)
def test_threshold_bounded(original: float, proposed: float, expected: float) -> None:
    exps = [{"type": "llm_review", "criteria": "c", "threshold": original}]
    plan = plan_corrections(exps, [fix(0, threshold=proposed)])
    (c,) = plan.applied
    assert c.new == expected and plan.expectations[0]["threshold"] == expected
    assert bool(c.note) == (expected != proposed)


@pytest.mark.parametrize(
    ("original", "proposed"),
    [(2.5, 2.0), (2.0, 1.5), (4.0, 4.0), (4.0, 4.5), (4.0, True), (4.0, "3"), (4.0, float("nan"))],
)
def test_threshold_refused(original: float, proposed: Any) -> None:
    exps = [{"type": "llm_review", "criteria": "c", "threshold": original}]
    plan = plan_corrections(exps, [fix(0, threshold=proposed)])
    assert plan.applied == [] and len(plan.rejected) == 1
    assert plan.expectations == exps


def test_threshold_default_is_three() -> None:
    new, applied = apply_corrections([{"type": "llm_review", "criteria": "c"}], [fix(0, threshold=2.0)])
    assert new[0]["threshold"] == 2.5 and applied[0].old == 3.0


def test_custom_floor() -> None:
    new, _ = apply_corrections([{"type": "llm_review", "criteria": "c", "threshold": 3.0}], [fix(0, threshold=2.0)],
                               floor=2.8)
    assert new[0]["threshold"] == 2.8


@pytest.mark.parametrize(
    ("proposal", "why"),
    [
        (fix(0, verdict="work_wrong", command="x"), "verdict"),
        (fix(0, verdict="unsure", command="x"), "verdict"),
        ({"index": 0, "reason": "r", "fix": {"command": "x"}}, "verdict"),
        ({"index": 0, "verdict": "expectation_wrong"}, "no fix"),
        (fix(0, path="x.ts"), "cannot be changed"),
        (fix(0, command="a", threshold=3.0), "exactly one"),
        (fix(0), "exactly one"),
        (fix(0, command="   "), "empty"),
        (fix(0, command="npm test -- --grep users"), "same"),
        (fix(2, command="true"), "cannot be changed"),
        (fix(1, paths=["/etc/passwd"]), "relative"),
        (fix(1, paths=["../outside.ts"]), "relative"),
        (fix(1, paths=[]), "non-empty"),
        (fix(1, paths="src/a.ts"), "non-empty"),
        (fix(1, paths=["src/routes/users.ts"]), "same"),
        (fix(5, command="pytest -q"), "firm"),
        (fix(9, command="x"), "out of range"),
        ({"type": "test", **fix(None, command="x")}, "ambiguous"),  # no index, and two test expectations
        (fix(None, command="x"), "no index"),
        ({"index": "zero", "verdict": "expectation_wrong", "fix": {"command": "x"}}, "not an integer"),
        ("just text", "not an object"),
    ],
)
def test_refused_proposals(proposal: Any, why: str) -> None:
    plan = plan_corrections(EXPS, [proposal])
    assert plan.applied == []
    (r,) = plan.rejected
    assert why in r.reason
    assert plan.expectations == EXPS


def test_index_found_by_type_when_unique_among_failed() -> None:
    plan = plan_corrections(EXPS, [{"type": "test", "verdict": "expectation_wrong", "fix": {"command": "make test"}}],
                            failed={0, 2})
    assert [c.index for c in plan.applied] == [0]


def test_only_failed_expectations_are_corrected() -> None:
    plan = plan_corrections(EXPS, [fix(0, command="make test"), fix(3, command="bash v.sh")], failed={3})
    assert [c.index for c in plan.applied] == [3]
    assert "did not fail" in plan.rejected[0].reason


def test_two_proposals_for_one_expectation_are_ambiguous() -> None:
    plan = plan_corrections(EXPS, [fix(0, command="a"), fix(0, command="b"), fix(3, command="bash v.sh")])
    assert [c.index for c in plan.applied] == [3]
    assert len(plan.rejected) == 2 and all("ambiguous" in r.reason for r in plan.rejected)


def test_several_corrections_of_the_same_type_target_their_own_index() -> None:
    """Polpo corrected the first expectation of a type (spec G6); here the index decides."""
    exps = [{"type": "file_exists", "path": "a.txt"}, {"type": "file_exists", "path": "b.txt"}]
    new, applied = apply_corrections(exps, [fix(1, path="c.txt")])
    assert new == [{"type": "file_exists", "path": "a.txt"}, {"type": "file_exists", "path": "c.txt"}]
    assert applied[0].index == 1


@pytest.mark.parametrize("proposals", [None, {}, {"corrections": []}, "nonsense", 42, {"corrections": "x"}])
def test_malformed_proposals_change_nothing(proposals: Any) -> None:
    new, applied = apply_corrections(EXPS, proposals)
    assert new == EXPS and applied == []


def test_mapping_form_accepted() -> None:
    new, applied = apply_corrections(EXPS, {"corrections": [fix(0, command="make test")]})
    assert new[0]["command"] == "make test" and len(applied) == 1


def test_corrected_expectation_must_stay_valid() -> None:
    exps = [{"type": "script", "command": "a", "bogusKey": 1}]
    plan = plan_corrections(exps, [fix(0, command="b")])
    assert plan.applied == [] and "invalid" in plan.rejected[0].reason


def test_known_files_restrict_path_corrections() -> None:
    known = ["src/api/users.ts", "./build/index.js"]
    plan = plan_corrections(EXPS, [fix(1, paths=["src/api/users.ts"]), fix(4, path="README.md")],
                            known_files=known)
    assert [c.index for c in plan.applied] == [1]
    assert "README.md is not among the files" in plan.rejected[0].reason
    new, applied = apply_corrections(EXPS, [fix(4, path="build/index.js")], known_files=known)
    assert new[4]["path"] == "build/index.js" and len(applied) == 1
