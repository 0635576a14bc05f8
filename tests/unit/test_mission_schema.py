"""The mission file: models, durations and deadlines, and the loader's problems (exact JSON path + reason)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from polpo.checks.command import TestExpectation
from polpo.checks.file_exists import FileExistsExpectation
from polpo.durations import format_duration, parse_iso_duration
from polpo.mission.loader import LoadResult, Problem, format_problems, load_mission
from polpo.mission.schema import MissionSpec, mission_json_schema

# Polpo's workflow templates: a copy in the repo if there is one, else the shared seeds.
EXAMPLES = next(
    (
        p
        for p in (
            Path(__file__).resolve().parents[2] / "templates",
            Path("/work/shared/seeds/polpo-examples"),
        )
        if p.is_dir()
    ),
    Path("polpo-examples-not-found"),
)


def task(title: str, **extra: Any) -> dict[str, Any]:
    return {"title": title, "description": f"do {title}", **extra}


def load(doc: Any, known: list[str] | None = None) -> LoadResult:
    raw = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    return load_mission(raw, known_agents=known)


def problems(doc: Any, known: list[str] | None = None) -> list[tuple[str, str]]:
    r = load(doc, known)
    assert (r.spec is None) == bool(r.problems)
    return [(p.path, p.message) for p in r.problems]


def ok(doc: Any, known: list[str] | None = None) -> MissionSpec:
    r = load(doc, known)
    assert r.problems == [], r.problems
    assert r.spec is not None
    return r.spec


# ------------------------------------------------------------------------------------- Polpo's examples


def _fill(node: Any, values: dict[str, str]) -> Any:
    if isinstance(node, str):
        return re.sub(r"\{\{(\w+)\}\}", lambda m: values.get(m.group(1), "x"), node)
    if isinstance(node, list):
        return [_fill(v, values) for v in node]
    if isinstance(node, dict):
        return {k: _fill(v, values) for k, v in node.items()}
    return node


def example_plan(name: str) -> dict[str, Any]:
    template = json.loads((EXAMPLES / f"{name}.workflow.json").read_text())
    values = {p["name"]: str(p.get("default", "x")) for p in template.get("parameters", [])}
    plan: dict[str, Any] = _fill(template["plan"], values)
    return plan


EXAMPLE_NAMES = ["bug-fix", "code-review", "preventivo-pdf", "refactoring", "site-audit"]


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason="Polpo examples not available")
@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_polpo_example_plans_validate(name: str) -> None:
    plan = example_plan(name)
    r = load(plan)
    assert r.problems == []
    assert r.spec is not None and len(r.spec.tasks) == len(plan["tasks"])
    # the team alone makes assignTo resolvable even when the daemon has no agents of its own
    assert load(plan, known=[]).problems == []


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason="Polpo examples not available")
def test_code_review_example_maps_enable_git_onto_worktree_isolation_and_keeps_its_gate() -> None:
    r = load(example_plan("code-review"))
    assert not [w for w in r.warnings if "enableGit" in w]  # implemented now: no "not implemented" warning
    assert r.spec is not None
    assert [a.enable_git for a in r.spec.team] == [True, True]
    gate = r.spec.quality_gates[0]
    assert (gate.after_tasks, gate.blocks_tasks, gate.min_score) == (
        ["Analyze x"],
        ["Apply critical fixes"],
        3.5,
    )


# ------------------------------------------------------------------------------------------ error table

A, B = task("A"), task("B")
# what the author gives the judge besides the rubric: reference, examples, checklist
_REVIEW_INPUTS: list[tuple[str, dict[str, Any], str, str]] = [
    ("reference of a wrong type", {"reference": 3}, "reference",
     'must be the reference text or {"file": "<its path>"}'),
    ("reference file empty", {"reference": {"file": ""}}, "reference.file", "must not be empty"),
    ("reference misspelt key", {"reference": {"file": "a.py", "fiel": "b.py"}}, "reference.fiel",
     'unknown key; did you mean "file"?'),
    ("examples of a wrong type", {"examples": 5}, "examples",
     "must be a list of scored examples or the path of a labels file"),
    ("examples path blank", {"examples": " "}, "examples",
     "give a list of scored examples or the path of a labels file"),
    ("example with output and file", {"examples": [{"output": "x", "score": 3}, {"output": "x",
                                                                                  "file": "a", "score": 3}]},
     "examples[1]", 'an example gives exactly one of "output" or "file"'),
    ("example score off the scale", {"examples": [{"output": "x", "score": 6}]}, "examples[0].score",
     "less than or equal to 5"),
    ("example score not a number", {"examples": [{"output": "x", "score": "high"}]},
     "examples[0].score", "must be a number (got a string)"),
    ("checklist empty", {"checklist": []}, "checklist", "give at least one question"),
    ("checklist too long", {"checklist": ["q"] * 31}, "checklist", "at most 30 questions (got 31)"),
    ("checklist blank question", {"checklist": ["ok?", " "]}, "checklist[1].question", "must not be empty"),
    ("checklist weight zero", {"checklist": [{"question": "q", "weight": 0}]}, "checklist[0].weight",
     "greater than 0"),
    ("checklist misspelt key", {"checklist": [{"question": "q", "wieght": 2}]}, "checklist[0].wieght",
     'unknown key; did you mean "weight"?'),
    ("checklist of a wrong type", {"checklist": "is it right?"}, "checklist", "must be a list"),
    ("checklist names an unknown dimension",
     {"dimensions": [{"name": "works", "weight": 1}], "checklist": [{"question": "q", "dimension": "tests"}]},
     "checklist[0].dimension", '"tests" is not one of the dimensions (works)'),
    ("checklist question without its dimension",
     {"dimensions": [{"name": "works", "weight": 0.5}, {"name": "tests", "weight": 0.5}],
      "checklist": [{"question": "q", "dimension": "Tests"}, "Is it fast?"]},
     "checklist[1]", 'say which one the question scores (write it as {"question": …, "dimension": one of '
                     "works, tests})"),
]
REVIEW_INPUT_CASES: list[tuple[str, Any, list[str] | None, str, str]] = [
    (name, {"tasks": [task("a", expectations=[{"type": "llm_review", "criteria": "c", **fields}])]}, None,
     "$.tasks[0].expectations[0]." + where, message)
    for name, fields, where, message in _REVIEW_INPUTS
]

CASES: list[tuple[str, Any, list[str] | None, str, str]] = [
    ("empty file", b"", None, "$", "file is empty"),
    ("blank file", b"  \n", None, "$", "file is empty"),
    ("not utf-8", b'{"tasks": "\xff"}', None, "$", "not valid JSON: not UTF-8 text (line 1, column 12)"),
    ("not json", b"this is not json", None, "$", "not valid JSON: Expecting value (line 1, column 1)"),
    ("truncated", b'{"tasks": [\n{"title": "a"', None, "$", "not valid JSON:"),
    ("NaN", b'{"tasks": [], "x": NaN}', None, "$", "not valid JSON: NaN"),
    ("top level list", [A], None, "$", "top level must be a JSON object"),
    (
        "duplicate key",
        b'{"tasks": [{"title": "a", "title": "b", "description": "d"}]}',
        None,
        "$.tasks[0].title",
        "duplicate key",
    ),
    (
        "nested duplicate key",
        b'{"tasks": [{"title": "a", "description": "d", "notifications": {"x": 1, "x": 2}}]}',
        None,
        "$.tasks[0].notifications.x",
        "duplicate key",
    ),
    ("odd key quoted in the path", {"tasks": [task("a")], "my key": 1}, None, '$["my key"]', "unknown key"),
    ("no tasks key", {}, None, "$.tasks", "a mission needs at least one task"),
    ("empty tasks", {"tasks": []}, None, "$.tasks", "a mission needs at least one task"),
    ("wrong type", {"tasks": [task("a", priority="high")]}, None, "$.tasks[0].priority", "must be a number"),
    ("numeric string", {"tasks": [task("a", maxRetries="2")]}, None, "$.tasks[0].maxRetries", "whole number"),
    (
        "title not a string",
        {"tasks": [{"title": 3, "description": "d"}]},
        None,
        "$.tasks[0].title",
        "must be a string (got a number)",
    ),
    ("blank title", {"tasks": [task(" ")]}, None, "$.tasks[0].title", "must not be empty"),
    (
        "missing description",
        {"tasks": [{"title": "a"}]},
        None,
        "$.tasks[0].description",
        "required field missing",
    ),
    ("priority zero", {"tasks": [task("a", priority=0)]}, None, "$.tasks[0].priority", "greater than 0"),
    (
        "unknown key",
        {"tasks": [task("a", dependOn=[])]},
        None,
        "$.tasks[0].dependOn",
        'unknown key; did you mean "dependsOn"?',
    ),
    (
        "unknown top key",
        {"tasks": [A], "qualityGate": []},
        None,
        "$.qualityGate",
        'did you mean "qualityGates"?',
    ),
    (
        "unknown agent key",
        {"tasks": [A], "team": [{"name": "x", "enablegit": True}]},
        None,
        "$.team[0].enablegit",
        'did you mean "enableGit"?',
    ),
    (
        "unknown expectation key",
        {"tasks": [task("a", expectations=[{"type": "test", "command": "x", "comand": "y"}])]},
        None,
        "$.tasks[0].expectations[0].comand",
        'did you mean "command"?',
    ),
    (
        "missing test command",
        {"tasks": [task("a", expectations=[{"type": "test"}])]},
        None,
        "$.tasks[0].expectations[0].command",
        "required field missing",
    ),
    (
        "unknown expectation type",
        {"tasks": [task("a", expectations=[{"type": "lint"}])]},
        None,
        "$.tasks[0].expectations[0].type",
        'unknown expectation type "lint"; use one of: file_content, file_exists, test, script, metric, llm_review',
    ),
    (
        "expectation without type",
        {"tasks": [task("a", expectations=[{"command": "x"}])]},
        None,
        "$.tasks[0].expectations[0].type",
        "required field missing; use one of",
    ),
    (
        "path and paths",
        {"tasks": [task("a", expectations=[{"type": "file_exists", "path": "a", "paths": ["b"]}])]},
        None,
        "$.tasks[0].expectations[0]",
        "exactly one of path or paths",
    ),
    (
        "empty paths",
        {"tasks": [task("a", expectations=[{"type": "file_exists", "paths": []}])]},
        None,
        "$.tasks[0].expectations[0]",
        "at least one file",
    ),
    (
        "blank path",
        {"tasks": [task("a", expectations=[{"type": "file_exists", "paths": [""]}])]},
        None,
        "$.tasks[0].expectations[0].paths[0]",
        "must not be empty",
    ),
    (
        "review without criteria",
        {"tasks": [task("a", expectations=[{"type": "llm_review", "criteria": " "}])]},
        None,
        "$.tasks[0].expectations[0]",
        "needs criteria, a prompt, dimensions or a checklist",
    ),
    (
        "threshold out of range",
        {"tasks": [task("a", expectations=[{"type": "llm_review", "criteria": "c", "threshold": 6}])]},
        None,
        "$.tasks[0].expectations[0].threshold",
        "less than or equal to 5",
    ),
    (
        "bad dimension weight",
        {
            "tasks": [
                task("a", expectations=[{"type": "llm_review", "dimensions": [{"name": "d", "weight": 0}]}])
            ]
        },
        None,
        "$.tasks[0].expectations[0].dimensions[0].weight",
        "greater than 0",
    ),
    (
        "bad rubric",
        {
            "tasks": [
                task(
                    "a",
                    expectations=[
                        {
                            "type": "llm_review",
                            "dimensions": [{"name": "d", "weight": 1, "rubric": {"6": "x"}}],
                        }
                    ],
                )
            ]
        },
        None,
        "$.tasks[0].expectations[0].dimensions[0].rubric",
        'map from "1".."5"',
    ),
    *REVIEW_INPUT_CASES,
    (
        "bad confidence",
        {"tasks": [task("a", expectations=[{"type": "test", "command": "x", "confidence": "sure"}])]},
        None,
        "$.tasks[0].expectations[0].confidence",
        "must be 'firm' or 'estimated'",
    ),
    (
        "bad outcome type",
        {"tasks": [task("a", expectedOutcomes=[{"type": "pdf", "label": "x"}])]},
        None,
        "$.tasks[0].expectedOutcomes[0].type",
        "must be 'file'",
    ),
    (
        "escalateAfter zero",
        {"tasks": [task("a", retryPolicy={"escalateAfter": 0})]},
        None,
        "$.tasks[0].retryPolicy.escalateAfter",
        "greater than or equal to 1",
    ),
    (
        "command agent without argv",
        {"tasks": [A], "team": [{"name": "x", "type": "command"}]},
        None,
        "$.team[0]",
        "a command agent needs",
    ),
    (
        "unknown settings key",
        {"tasks": [A], "settings": {"maxRetry": 1}},
        None,
        "$.settings.maxRetry",
        'did you mean "maxRetries"?',
    ),
    ("schema version", {"tasks": [A], "schemaVersion": 2}, None, "$.schemaVersion", "must be 1"),
    (
        "quality threshold",
        {"tasks": [A], "qualityThreshold": 0.5},
        None,
        "$.qualityThreshold",
        "greater than or equal to 1",
    ),
    # whole-document checks
    (
        "duplicate titles",
        {"tasks": [A, B, task("C"), task("B")]},
        None,
        "$.tasks[3].title",
        'duplicate title "B" (first used at $.tasks[1])',
    ),
    (
        "duplicate review dimensions",
        {"tasks": [task("a", expectations=[{"type": "llm_review", "dimensions": [
            {"name": "Code quality", "weight": 1}, {"name": "code_quality", "weight": 2}]}])]},
        None,
        "$.tasks[0].expectations[0].dimensions[1].name",
        'duplicate dimension "code_quality" (first at dimensions[0])',
    ),
    (
        "titles compared stripped",
        {"tasks": [A, task(" A ")]},
        None,
        "$.tasks[1].title",
        'duplicate title "A" (first used at $.tasks[0])',
    ),
    (
        "unknown agent",
        {"tasks": [task("a", assignTo="nobody")]},
        ["shell"],
        "$.tasks[0].assignTo",
        'no agent named "nobody"; available: shell',
    ),
    (
        "agent suggestion",
        {"tasks": [task("a", assignTo="revewer")], "team": [{"name": "reviewer"}]},
        [],
        "$.tasks[0].assignTo",
        'did you mean "reviewer"?',
    ),
    (
        "ambiguous agent",
        {"tasks": [A]},
        ["one", "two"],
        "$.tasks[0]",
        "assignTo is required when more than one agent is available (one, two)",
    ),
    (
        "ambiguous team",
        {"tasks": [A], "team": [{"name": "x"}, {"name": "y"}]},
        None,
        "$.tasks[0]",
        "assignTo is required when more than one agent is available",
    ),
    ("no agent at all", {"tasks": [A]}, [], "$.tasks[0]", "no agent is available"),
    (
        "unknown fallback agent",
        {"tasks": [task("a", assignTo="shell", retryPolicy={"fallbackAgent": "senior"})]},
        ["shell"],
        "$.tasks[0].retryPolicy.fallbackAgent",
        'no agent named "senior"',
    ),
    (
        "duplicate agent",
        {"tasks": [A], "team": [{"name": "x"}, {"name": "x"}]},
        None,
        "$.team[1].name",
        'duplicate agent name "x" (first used at $.team[0])',
    ),
    (
        "unknown dependency",
        {"tasks": [A, task("B", dependsOn=["A", "Buid"])], "x": 1},
        None,
        "$.tasks[1].dependsOn[1]",
        'no task titled "Buid"',
    ),
    (
        "dependency suggestion",
        {"tasks": [task("Build API"), task("B", dependsOn=["Build APi"])]},
        None,
        "$.tasks[1].dependsOn[0]",
        'did you mean "Build API"?',
    ),
    (
        "self dependency",
        {"tasks": [task("A", dependsOn=["A"])]},
        None,
        "$.tasks[0].dependsOn[0]",
        "a task cannot depend on itself",
    ),
    (
        "two-cycle",
        {"tasks": [task("a", dependsOn=["b"]), task("b", dependsOn=["a"])]},
        None,
        "$.tasks[0].dependsOn",
        "dependency cycle: a → b → a",
    ),
    (
        "gate unknown after",
        {"tasks": [A], "qualityGates": [{"name": "g", "afterTasks": ["A", "X"], "blocksTasks": ["A"]}]},
        None,
        "$.qualityGates[0].afterTasks[1]",
        'no task titled "X"',
    ),
    (
        "gate unknown blocks",
        {"tasks": [A], "qualityGates": [{"name": "g", "afterTasks": ["A"], "blocksTasks": ["Z"]}]},
        None,
        "$.qualityGates[0].blocksTasks[0]",
        'no task titled "Z"',
    ),
    (
        "gate blocks what it waits for",
        {"tasks": [A, B], "qualityGates": [{"name": "g", "afterTasks": ["A", "B"], "blocksTasks": ["B"]}]},
        None,
        "$.qualityGates[0].blocksTasks[0]",
        '"B" is also in afterTasks',
    ),
    (
        "duplicate gate",
        {
            "tasks": [A, B],
            "qualityGates": [
                {"name": "g", "afterTasks": ["A"], "blocksTasks": ["B"]},
                {"name": "g", "afterTasks": ["A"], "blocksTasks": ["B"]},
            ],
        },
        None,
        "$.qualityGates[1].name",
        'duplicate gate name "g" (first used at $.qualityGates[0])',
    ),
    (
        "gate with empty lists",
        {"tasks": [A], "qualityGates": [{"name": "g", "afterTasks": [], "blocksTasks": ["A"]}]},
        None,
        "$.qualityGates[0].afterTasks",
        "must list at least one entry",
    ),
    (
        "gate min score",
        {
            "tasks": [A, B],
            "qualityGates": [{"name": "g", "afterTasks": ["A"], "blocksTasks": ["B"], "minScore": 7}],
        },
        None,
        "$.qualityGates[0].minScore",
        "less than or equal to 5",
    ),
]


@pytest.mark.parametrize(
    ("doc", "known", "path", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_problem_table(doc: Any, known: list[str] | None, path: str, message: str) -> None:
    found = problems(doc, known)
    assert any(p == path and message in m for p, m in found), found


@pytest.mark.parametrize(
    ("doc", "path", "message"), [(c[1], c[3], c[4]) for c in REVIEW_INPUT_CASES], ids=[c[0] for c in REVIEW_INPUT_CASES]
)
def test_a_bad_review_input_is_one_problem_at_its_own_path(doc: Any, path: str, message: str) -> None:
    """Not one per shape pydantic tried (``reference.str``, ``examples["list[function-after[…]]"]``)."""
    ((p, m),) = problems(doc)
    assert p == path and message in m


def test_the_review_inputs_as_the_mission_writes_them() -> None:
    spec = ok({"tasks": [task("a", expectations=[{
        "type": "llm_review", "reference": {"file": "ref/solution.py"}, "examples": "labels.jsonl",
        "dimensions": [{"name": "Works", "weight": 0.6}, {"name": "tests", "weight": 0.4}],
        "checklist": [{"question": "Do the stated examples pass?", "dimension": "works"},
                      {"question": "Is there a test?", "dimension": "Tests", "weight": 0.5}]}])]})
    exp = spec.tasks[0].expectations[0]
    assert exp.reference.file == "ref/solution.py" and exp.examples == "labels.jsonl"
    for outside in ("/srv/ref/solution.py", "../ref.py"):  # files are the workspace's: inline text is kept from it
        ((path, message),) = problems({"tasks": [task("a", expectations=[{
            "type": "llm_review", "criteria": "c", "reference": {"file": outside}}])]})
        assert path == "$.tasks[0].expectations[0].reference.file" and "workspace" in message
    assert [(c.question, c.dimension, c.weight) for c in exp.checklist] == [
        ("Do the stated examples pass?", "works", 1.0), ("Is there a test?", "Tests", 0.5)]
    spec = ok({"tasks": [task("a", expectations=[{
        "type": "llm_review", "reference": "42", "examples": [{"output": "41", "score": 1, "why": "off by one"}],
        "checklist": ["Is the answer 42?"]}])]})
    exp = spec.tasks[0].expectations[0]
    assert exp.reference == "42" and exp.examples[0].score == 1 and exp.checklist[0].dimension is None


def test_problems_are_reported_all_at_once() -> None:
    doc = {
        "tasks": [task("A", priority="high"), task("B", dependsOn=["Nope"]), task("B")],
        "qualityGates": [{"name": "g", "afterTasks": ["Z"], "blocksTasks": ["A"]}],
    }
    found = problems(doc)
    assert [p for p, _ in found] == [
        "$.qualityGates[0].afterTasks[0]",
        "$.tasks[0].priority",
        "$.tasks[1].dependsOn[0]",
        "$.tasks[2].title",
    ]


def test_one_problem_per_json_error_and_format() -> None:
    r = load(b'{\n  "tasks": [1,\n')
    assert len(r.problems) == 1
    assert format_problems("m.json", r.problems)[0].startswith("m.json: $: not valid JSON: ")
    assert format_problems("m.json", [Problem("$.tasks[0]", "bad")]) == ["m.json: $.tasks[0]: bad"]


def test_problem_lists_are_sorted_by_position_with_numeric_indices() -> None:
    doc = {"tasks": [task(f"t{i}", priority=0 if i in (2, 10) else 1) for i in range(11)]}
    assert [p for p, _ in problems(doc)] == ["$.tasks[2].priority", "$.tasks[10].priority"]


# --------------------------------------------------------------------------------------- dependencies


def test_forward_depends_on_is_kept() -> None:
    spec = ok({"tasks": [task("A", dependsOn=["B"]), task("B")]})
    assert spec.tasks[0].depends_on == ["B"]


def test_three_cycle_is_reported_at_the_first_task_of_the_cycle() -> None:
    doc = {
        "tasks": [
            task("Z"),
            task("A", dependsOn=["B"]),
            task("B", dependsOn=["C"]),
            task("C", dependsOn=["A"]),
        ]
    }
    assert problems(doc) == [("$.tasks[1].dependsOn", "dependency cycle: A → B → C → A")]


def test_cycle_made_by_a_gate_names_the_gate() -> None:
    doc = {
        "tasks": [task("A"), task("B", dependsOn=["A"])],
        "qualityGates": [{"name": "g", "afterTasks": ["B"], "blocksTasks": ["A"]}],
    }
    assert problems(doc) == [
        ("$.qualityGates[0]", 'dependency cycle: A → B → A (gate "g" makes "A" wait for "B")')
    ]
    doc["tasks"] = [task("B", dependsOn=["A"]), task("A")]
    assert problems(doc) == [
        ("$.tasks[0].dependsOn", 'dependency cycle: B → A → B (gate "g" makes "A" wait for "B")')
    ]


def test_a_gate_that_follows_dependencies_is_fine() -> None:
    spec = ok(
        {
            "tasks": [task("A"), task("B", dependsOn=["A"])],
            "qualityGates": [
                {
                    "name": "g",
                    "afterTasks": ["A"],
                    "blocksTasks": ["B"],
                    "minScore": 3.5,
                    "requireAllPassed": True,
                    "notifyChannels": ["ops"],
                }
            ],
        }
    )
    assert spec.quality_gates[0].require_all_passed and spec.quality_gates[0].notify_channels == ["ops"]


def test_snake_case_keys_are_accepted_and_checked_too() -> None:
    spec = ok({"tasks": [task("A", depends_on=["B"]), task("B", max_retries=2)]})
    assert spec.tasks[0].depends_on == ["B"] and spec.tasks[1].max_retries == 2
    assert problems({"tasks": [task("A", depends_on=["Q"])]}) == [
        ("$.tasks[0].depends_on[0]", 'no task titled "Q"')
    ]


def test_ten_thousand_task_chain_loads() -> None:
    n = 10_000
    doc = {"tasks": [task(f"t{i}", **({"dependsOn": [f"t{i - 1}"]} if i else {})) for i in range(n)]}
    spec = ok(doc)
    assert spec.tasks[-1].depends_on == [f"t{n - 2}"]
    doc["tasks"][0]["dependsOn"] = [f"t{n - 1}"]
    found = problems(doc)
    assert len(found) == 1 and found[0][0] == "$.tasks[0].dependsOn" and "dependency cycle" in found[0][1]


# ------------------------------------------------------------------------------------------- agents


def test_single_available_agent_makes_assign_to_optional() -> None:
    assert ok({"tasks": [A]}, known=["shell"]).tasks[0].assign_to is None
    assert ok({"tasks": [A], "team": [{"name": "solo"}]}, known=[]).tasks[0].assign_to is None
    assert ok({"tasks": [A]}).tasks[0].assign_to is None  # daemon agents unknown: not checked


def test_agent_references_are_not_checked_without_known_agents() -> None:
    assert ok({"tasks": [task("a", assignTo="anyone", retryPolicy={"fallbackAgent": "boss"})]})


def test_team_agent_fields() -> None:
    spec = ok(
        {
            "tasks": [task("a", assignTo="bot")],
            "team": [
                {
                    "name": "bot",
                    "type": "command",
                    "command": ["echo", "{title}"],
                    "timeout": "PT5M",
                    "maxConcurrency": 2,
                    "env": {"A": "1"},
                },
                {
                    "name": "writer",
                    "role": "writes",
                    "model": "m",
                    "maxTurns": 10,
                    "temperature": 0.2,
                    "systemPrompt": "be brief",
                    "apiBase": "http://127.0.0.1:1",
                },
            ],
        },
        known=[],
    )
    bot, writer = spec.team
    assert (
        bot.command == ["echo", "{title}"] and bot.timeout == timedelta(minutes=5) and bot.env == {"A": "1"}
    )
    assert writer.type is None and writer.max_turns == 10 and writer.api_base == "http://127.0.0.1:1"


def test_team_agent_hiding_a_configured_agent_is_a_warning() -> None:
    r = load({"tasks": [task("a", assignTo="shell")], "team": [{"name": "shell"}]}, known=["shell"])
    assert r.spec is not None
    assert r.warnings == [
        '$.team[0].name: team agent "shell" is used instead of the configured agent of the '
        "same name in this mission"
    ]


# --------------------------------------------------------------------------------- tolerated Polpo keys


def test_tolerated_polpo_fields_warn_with_their_path_and_are_not_stored() -> None:
    doc = {
        "tasks": [task("a", metrics=[], confidence="firm", group="g", phase="x")],
        "team": [{"name": "x", "reportsTo": "y", "enablePdf": True, "skills": []}],
        "settings": {"enableVolatileTeams": True, "maxRetries": 1},
        "checkpoints": [],
        "delays": [],
        "expectedOutcomes": [],
        "prompt": "p",
    }
    r = load(doc)
    assert r.spec is not None
    assert r.warnings == [
        f"{p}: Polpo field not implemented by polpo; ignored"
        for p in [
            "$.expectedOutcomes",
            "$.prompt",
            "$.settings.enableVolatileTeams",
            "$.tasks[0].metrics",
            "$.tasks[0].confidence",
            "$.tasks[0].group",
            "$.tasks[0].phase",
            "$.team[0].reportsTo",
            "$.team[0].enablePdf",
            "$.team[0].skills",
        ]
    ]
    dumped = r.spec.model_dump(by_alias=True)
    assert dumped["checkpoints"] == [] and "metrics" not in dumped["tasks"][0]
    assert not {"metrics", "confidence", "group", "phase"} & set(dumped["tasks"][0])


def test_gate_condition_is_tolerated_and_warnings_come_with_problems() -> None:
    r = load(
        {
            "tasks": [A, B],
            "qualityGates": [
                {"name": "g", "afterTasks": ["A"], "blocksTasks": ["B"], "condition": "score > 3"}
            ],
            "bogus": 1,
        }
    )
    assert r.spec is None and [p.path for p in r.problems] == ["$.bogus"]
    assert r.warnings == ["$.qualityGates[0].condition: Polpo field not implemented by polpo; ignored"]


# ------------------------------------------------------------------------------- durations and deadlines


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("PT30S", timedelta(seconds=30)),
        (90, timedelta(seconds=90)),
        (1.5, timedelta(seconds=1.5)),
        ("P1DT1H", timedelta(hours=25)),
        ("PT1H30M", timedelta(minutes=90)),
        ("PT0.25S", timedelta(seconds=0.25)),
        ("P2W", timedelta(days=14)),
        ("P1Y", timedelta(days=365)),
        ("P1M", timedelta(days=30)),
        ("pt10m", timedelta(minutes=10)),
    ],
)
def test_durations(value: Any, expected: timedelta) -> None:
    spec = ok(
        {
            "tasks": [
                task(
                    "a", maxDuration=value, expectations=[{"type": "test", "command": "x", "timeout": value}]
                )
            ]
        }
    )
    exp = spec.tasks[0].expectations[0]
    assert spec.tasks[0].max_duration == expected
    assert isinstance(exp, TestExpectation) and exp.timeout == expected
    assert parse_iso_duration(format_duration(expected)) == expected


@pytest.mark.parametrize(
    "value", ["1 hour", "P", "PT", "P1DT", "PT-1S", "P1H", 0, -5, "PT0S", True, None, [1]]
)
def test_bad_durations(value: Any) -> None:
    found = problems({"tasks": [task("a", maxDuration=value)]})
    if value is None:  # null means "not set"
        assert found == []
    else:
        assert [p for p, _ in found] == ["$.tasks[0].maxDuration"]


def test_bad_duration_message_says_what_to_write() -> None:
    assert problems({"tasks": [task("a", maxDuration="1 hour")]}) == [
        (
            "$.tasks[0].maxDuration",
            "'1 hour' is not a number of seconds or an ISO-8601 duration such as PT30S, PT1H30M or P1D",
        )
    ]


def test_deadlines() -> None:
    spec = ok(
        {
            "tasks": [
                task("a", deadline="2026-12-01T18:00:00Z"),
                task("b", deadline="2026-12-01T18:00+01:00"),
                task("c", deadline="PT2H"),
            ],
            "deadline": "P1D",
        }
    )
    assert spec.tasks[0].deadline == datetime(2026, 12, 1, 18, tzinfo=UTC)
    assert spec.tasks[1].deadline == datetime(2026, 12, 1, 18, tzinfo=timezone(timedelta(hours=1)))
    assert spec.tasks[2].deadline == timedelta(hours=2)
    assert spec.deadline == timedelta(days=1)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("2026-12-01T18:00:00", "add a timezone, e.g. Z or +01:00"),
        ("tomorrow", "neither an ISO-8601 instant"),
        (3600, "a deadline is a string"),
        ("PT0S", "greater than zero"),
    ],
)
def test_bad_deadlines(value: Any, message: str) -> None:
    found = problems({"tasks": [task("a", deadline=value)]})
    assert len(found) == 1 and found[0][0] == "$.tasks[0].deadline" and message in found[0][1]


# ------------------------------------------------------------------------------------- models in Python


def test_round_trip_through_stored_json() -> None:
    spec = ok(
        {
            "name": "m",
            "tasks": [
                task(
                    "a",
                    deadline="2026-12-01T18:00:00Z",
                    maxDuration=90.5,
                    expectations=[
                        {"type": "file_exists", "path": "out.txt", "confidence": "estimated"},
                        {"type": "script", "command": "a\nb", "expectExitCode": 3, "timeout": "PT1M"},
                        {
                            "type": "llm_review",
                            "prompt": "p",
                            "threshold": 4,
                            "dimensions": [{"name": "d", "weight": 0.5, "rubric": {"1": "bad", "5": "good"}}],
                        },
                    ],
                    expectedOutcomes=[{"type": "file", "label": "out", "mimeType": "text/plain"}],
                    retryPolicy={"escalateAfter": 2, "fallbackAgent": "x", "escalateModel": "big"},
                    sideEffects=True,
                    notifications={"rules": []},
                )
            ],
            "deadline": "P1DT2H",
            "settings": {"maxConcurrency": 2},
        }
    )
    again = MissionSpec.model_validate_json(spec.model_dump_json(exclude_none=True))
    assert again == spec


def test_file_exists_all_paths_and_task_by_title() -> None:
    assert FileExistsExpectation(type="file_exists", path="a").all_paths == ["a"]
    assert FileExistsExpectation(type="file_exists", paths=["a", "b"]).all_paths == ["a", "b"]
    spec = ok({"tasks": [A, B]})
    assert spec.task_by_title("B") is spec.tasks[1] and spec.task_by_title("nope") is None
    with pytest.raises(ValueError, match="frozen"):
        spec.tasks[0].title = "x"  # type: ignore[misc]


def test_json_schema_is_usable_by_editors() -> None:
    schema = mission_json_schema()
    assert schema["$id"] and schema["title"] == "polpo mission"
    assert schema["required"] == ["tasks"] and schema["additionalProperties"] is False
    assert {"checkpoints", "delays", "expectedOutcomes", "prompt", "qualityGates"} <= set(
        schema["properties"]
    )
    team = schema["$defs"]["TeamAgent"]
    assert "enableGit" in team["properties"] and "^enable[A-Z]" in team["patternProperties"]
    assert "metrics" in schema["$defs"]["TaskSpec"]["properties"]
    assert "dependsOn" in schema["$defs"]["TaskSpec"]["properties"]
    json.dumps(schema)


def test_gates_may_name_tasks_by_id_and_are_stored_by_title() -> None:
    from polpo.mission.loader import load_mission

    doc = {"tasks": [task("write"), task("review"), task("ship")],
           "qualityGates": [{"name": "g", "afterTasks": ["release:1", "2"], "blocksTasks": ["release:3"]}]}
    res = load_mission(json.dumps(doc).encode(), known_agents=None)
    assert res.problems == []
    assert res.spec is not None
    gate = res.spec.quality_gates[0]
    assert (gate.after_tasks, gate.blocks_tasks) == (["write", "review"], ["ship"])
    bad = load_mission(json.dumps({**doc, "qualityGates": [
        {"name": "g", "afterTasks": ["release:9"], "blocksTasks": ["ship"]}]}).encode(), known_agents=None)
    assert [p.path for p in bad.problems] == ["$.qualityGates[0].afterTasks[0]"]
