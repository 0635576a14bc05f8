"""Polpo workflow/playbook templates: parameters, filling, every problem at once, leftover placeholders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from polpo.config import parse_config
from polpo.intake.scoped import scoped_problems
from polpo.mission.loader import json_path, load_mission
from polpo.mission.templates import (
    Template,
    fill,
    filled_bytes,
    is_template,
    leftover_placeholders,
    parse_params,
    parse_template,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "templates"


def tpl(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "fixer",
        "description": "fix a bug",
        "parameters": [
            {"name": "issue", "type": "string", "required": True, "description": "what is broken"},
            {"name": "cmd", "type": "string", "default": "pytest -q"},
            {"name": "depth", "type": "number", "default": 5},
            {"name": "strict", "type": "boolean", "default": False},
            {"name": "focus", "type": "string", "default": "all", "enum": ["all", "seo"]},
        ],
        "plan": {
            "tasks": [{
                "title": "Fix {{issue}}",
                "description": "Investigate: {{ issue }}\nup to {{depth}} pages, strict={{strict}}, focus {{focus}}",
                "assignTo": "shell",
                "maxRetries": "{{depth}}",
                "expectations": [{"type": "test", "command": "{{cmd}}"}],
            }],
        },
    }
    doc.update(over)
    return doc


def parsed(doc: dict[str, Any]) -> Template:
    t, problems, _ = parse_template(doc)
    assert problems == [] and t is not None
    return t


def paths(issues: list[tuple[Any, str]]) -> list[str]:
    return [json_path(loc) for loc, _ in issues]


# ------------------------------------------------------------------------------------------ detection
def test_a_template_is_told_from_a_mission() -> None:
    assert is_template(tpl())
    assert is_template({"name": "p", "mission": {"tasks": []}})
    assert not is_template({"tasks": [], "name": "x"})
    assert not is_template([1]) and not is_template(None)


def test_parameters_are_listed_with_defaults_and_required() -> None:
    t = parsed(tpl())
    assert [(p.name, p.type, p.required, p.default) for p in t.parameters] == [
        ("issue", "string", True, None), ("cmd", "string", False, "pytest -q"), ("depth", "number", False, 5),
        ("strict", "boolean", False, False), ("focus", "string", False, "all")]
    assert [p.name for p in t.required()] == ["issue"] and t.parameters[0].description == "what is broken"


def test_bad_parameter_definitions_are_all_reported_with_paths() -> None:
    doc = tpl(parameters=[{"name": "a b"}, {"name": "n", "type": "int"}, {"name": "d", "type": "number",
                                                                           "default": "x"},
                          {"name": "e", "default": "z", "enum": ["x", "y"]}, {"name": "d2"}, {"name": "d2"}, 3])
    t, problems, _ = parse_template(doc)
    assert t is None
    assert paths(problems) == ["$.parameters[0].name", "$.parameters[1].type", "$.parameters[2].default",
                               "$.parameters[3].default", "$.parameters[5].name", "$.parameters[6]"]


def test_a_playbook_mission_may_be_json_text() -> None:
    t = parsed({"name": "pb", "parameters": [], "mission": json.dumps({"tasks": [{"title": "a"}]})})
    assert t.key == "mission" and t.body == {"tasks": [{"title": "a"}]}
    _, problems, _ = parse_template({"name": "pb", "mission": "{not json"})
    assert paths(problems) == ["$.mission"]


# ------------------------------------------------------------------------------------------ filling
def test_fill_substitutes_inside_strings_and_types_whole_placeholders() -> None:
    r = fill(parsed(tpl()), {"issue": 'login says "no"\nthen crashes', "depth": "3", "strict": "yes"})
    assert r.issues == [] and r.mission is not None
    task = r.mission["tasks"][0]
    assert task["title"] == 'Fix login says "no"\nthen crashes'
    assert task["description"].endswith("up to 3 pages, strict=true, focus all")
    assert task["maxRetries"] == 3  # the whole string was the number parameter: a JSON number
    assert task["expectations"][0]["command"] == "pytest -q"
    assert (r.mission["name"], r.mission["description"]) == ("fixer", "fix a bug")
    assert list(r.mission)[:3] == ["name", "description", "tasks"]
    assert json.loads(filled_bytes(r.mission)) == r.mission  # quotes and newlines stay valid JSON
    assert filled_bytes(r.mission) == filled_bytes(fill(parsed(tpl()), {"issue": 'login says "no"\nthen crashes',
                                                                        "depth": "3", "strict": "yes"}).mission or {})


def test_the_plan_keeps_its_own_name_and_description() -> None:
    doc = tpl()
    doc["plan"]["name"] = "own {{issue}}"
    r = fill(parsed(doc), {"issue": "x"})
    assert r.mission is not None and r.mission["name"] == "own x" and r.mission["description"] == "fix a bug"


def test_every_missing_unknown_and_bad_value_is_reported_at_once() -> None:
    doc = tpl()
    doc["parameters"].append({"name": "who", "required": True})
    r = fill(parsed(doc), {"depht": "3", "depth": "many", "focus": "perf", "other": "1"})
    assert r.mission is None
    msgs = [f"{json_path(loc)}: {m}" for loc, m in r.issues]
    assert msgs == [
        '$: --param depht: the template has no parameter "depht" (it declares: issue, cmd, depth, strict, focus, who)',
        '$: --param other: the template has no parameter "other" (it declares: issue, cmd, depth, strict, focus, who)',
        '$.parameters[0]: required parameter "issue" is missing: pass --param issue=… (what is broken)',
        '$.parameters[2]: --param depth: must be a number (got "many")',
        '$.parameters[4]: --param focus: "perf" is not one of "all", "seo"',
        '$.parameters[5]: required parameter "who" is missing: pass --param who=…',
    ]


def test_a_placeholder_that_names_no_parameter_is_reported_with_its_path() -> None:
    doc = tpl()
    doc["plan"]["tasks"][0]["description"] = "use {{tool}} and {{issue}}"
    r = fill(parsed(doc), {"issue": "x"})
    assert [(json_path(loc), m.split(" names")[0]) for loc, m in r.issues] == [
        ("$.plan.tasks[0].description", 'placeholder "{{tool}}"')]


def test_rule_templates_keep_event_fields_and_get_parameters() -> None:
    doc = tpl()
    rule = {"events": ["mission:completed"], "channels": ["ops"], "template": "{{issue}}: {{data.outcome}}"}
    doc["plan"]["notifications"] = {"rules": [rule]}
    doc["plan"]["tasks"][0]["notifications"] = {"rules": [dict(rule, template="{{ depth }} {{taskId}}")]}
    r = fill(parsed(doc), {"issue": "bug 7"})
    assert r.issues == [] and r.mission is not None
    assert r.mission["notifications"]["rules"][0]["template"] == "bug 7: {{data.outcome}}"
    assert r.mission["tasks"][0]["notifications"]["rules"][0]["template"] == "5 {{taskId}}"
    assert leftover_placeholders(r.mission) == []


def test_github_expressions_are_not_placeholders() -> None:
    doc = tpl()
    doc["plan"]["tasks"][0]["description"] = "env: ${{ secrets.TOKEN }} for {{issue}}"
    r = fill(parsed(doc), {"issue": "x"})
    assert r.mission is not None and r.mission["tasks"][0]["description"] == "env: ${{ secrets.TOKEN }} for x"
    assert leftover_placeholders(r.mission) == []


def test_parse_params() -> None:
    assert parse_params(["a=1", "b==2", "c="]) == ({"a": "1", "b": "=2", "c": ""}, [])
    _, issues = parse_params(["a", "=x", "b=1", "b=2"])
    assert [m for _, m in issues] == ["--param a: write NAME=VALUE", "--param =x: write NAME=VALUE",
                                     "--param b is given twice"]


# ------------------------------------------------------------------------------------ leftovers, loader
def test_leftover_placeholders_have_json_paths() -> None:
    doc = {"tasks": [{"title": "t", "description": "run {{cmd}} on {{ cmd }} and {{x}}",
                      "expectations": [{"type": "test", "command": "{{cmd}}"}]}]}
    found = leftover_placeholders(doc)
    assert paths(found) == ["$.tasks[0].description", "$.tasks[0].expectations[0].command"]
    assert "{{cmd}}, {{x}}" in found[0][1] and "--param cmd=… --param x=…" in found[0][1]


def test_the_loader_rejects_a_plain_mission_with_a_placeholder() -> None:
    raw = json.dumps({"tasks": [{"title": "t", "description": "d", "assignTo": "shell",
                                 "expectations": [{"type": "test", "command": "{{test_command}}"}]}]}).encode()
    r = load_mission(raw, known_agents=["shell"])
    assert r.spec is None
    assert [(p.path, p.message.split(":")[0]) for p in r.problems] == [
        ("$.tasks[0].expectations[0].command", "unfilled template placeholder {{test_command}}")]


def test_the_loader_says_how_to_run_a_template() -> None:
    r = load_mission((EXAMPLES / "bug-fix.workflow.json").read_bytes(), known_agents=None)
    assert r.spec is None and len(r.problems) == 1
    assert r.problems[0].path == "$"
    assert "Polpo workflow template" in r.problems[0].message
    assert "polpo submit FILE --param issue=…" in r.problems[0].message


# ------------------------------------------------------------------------------- the five Polpo examples
PARAMS = {
    "bug-fix": {"issue": "login returns 500", "test_command": "python -m pytest -q"},
    "code-review": {"module": "src/auth", "focus": "security"},
    "preventivo-pdf": {"cliente": "ACME", "email_cliente": "a@acme.test", "descrizione_lavoro": "sito web",
                       "importo": "1200.50", "telegram_channel": "audit"},
    "refactoring": {"module": "src/util", "goal": "reduce complexity"},
    "site-audit": {"url": "https://example.com", "depth": "3", "telegram_channel": "audit"},
}


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_each_polpo_example_fills_and_validates_with_no_problem(name: str, tmp_path: Path) -> None:
    data = json.loads((EXAMPLES / f"{name}.workflow.json").read_text())
    r = fill(parsed(data), PARAMS[name])
    assert r.issues == [] and r.mission is not None
    assert leftover_placeholders(r.mission) == []
    assert "{{" not in json.dumps(r.mission)
    cfg = parse_config({
        "agents": {"writer": {"type": "llm", "model": "openai/test"}},
        "channels": {"audit": {"type": "file", "path": str(tmp_path / "n.jsonl")}},
    }, tmp_path / "polpo.toml")
    loaded = load_mission(filled_bytes(r.mission), known_agents=sorted(cfg.agents))
    assert loaded.problems == [] and loaded.spec is not None
    assert scoped_problems(loaded.spec, set(cfg.channels)) == []
    assert loaded.spec.name == name
    assert all(t.assign_to in {a.name for a in loaded.spec.team} for t in loaded.spec.tasks)


def test_a_number_goes_into_text_as_typed() -> None:
    doc = tpl()
    doc["plan"]["tasks"][0]["description"] = "total €{{depth}}"
    r = fill(parsed(doc), {"issue": "x", "depth": " 1200.50"})
    assert r.mission is not None and r.mission["tasks"][0]["description"] == "total €1200.50"
    assert r.values["depth"] == 1200.5 and r.mission["tasks"][0]["maxRetries"] == 1200.5


def test_a_placeholder_written_with_json_escapes_is_found_too() -> None:
    raw = b'{"tasks": [{"title": "t", "description": "\\u007b{x}}", "assignTo": "shell"}]}'
    r = load_mission(raw, known_agents=["shell"])
    assert [p.path for p in r.problems] == ["$.tasks[0].description"]
