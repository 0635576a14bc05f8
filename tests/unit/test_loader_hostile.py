"""The loader's edge: what no later stage can carry is refused with its JSON path; every message can be stored."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from polpo.intake.check import check_mission, stored_round_trip
from polpo.mission.jsonbytes import MAX_DEPTH, MAX_ENTRIES, MAX_VALUES
from polpo.mission.loader import load_mission

TASK = {"title": "t", "description": "d"}


def _load(doc: Any) -> list[tuple[str, str]]:
    raw = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    r = load_mission(raw, known_agents=None)
    assert r.spec is None
    for p in r.problems:  # every problem can be encoded, stored and logged
        p.path.encode("utf-8")
        p.message.encode("utf-8")
        assert "\x00" not in p.path + p.message
    return [(p.path, p.message) for p in r.problems]


@pytest.mark.parametrize(("raw", "path", "words"), [
    (b'{"tasks":[{"title":"x","assignTo":"\\ud800"}]}', "$.tasks[0].assignTo", "lone UTF-16 surrogate"),
    (b'{"tasks":[{"title":"x","description":"\\udfff tail"}]}', "$.tasks[0].description", "lone UTF-16 surrogate"),
    (b'{"tasks":[{"title":"a\\u0000b","description":"d"}]}', "$.tasks[0].title", "NUL character"),
    (b'{"tasks":[{"title":"t","description":"d","metrics":{"k":"\\u0000"}}]}', "$.tasks[0].metrics.k", "NUL"),
    (b'{"tasks":[{"title":"t","description":"d","metrics":{"\\ud800":1}}]}', '$.tasks[0].metrics["\\ud800"]',
     "this key contains a lone"),
    (b'{"tasks":[{"title":"t","description":"d","maxRetries":18446744073709551616}]}', "$.tasks[0].maxRetries",
     "out of range"),
    (b'{"tasks":[{"title":"t","description":"d","priority":-9007199254740993}]}', "$.tasks[0].priority",
     "out of range"),
    (b'{"tasks":[{"title":"t","description":"d","priority":1e999}]}', "$.tasks[0].priority", "out of range"),
    (b'{"tasks":[{"title":"t","description":"d"}],"delays":[-1e400]}', "$.delays[0]", "out of range"),
])
def test_values_nothing_downstream_can_carry_are_refused_with_their_path(raw: bytes, path: str, words: str) -> None:
    problems = _load(raw)
    assert [p for p, _ in problems] == [path]
    assert words in problems[0][1]


def test_two_to_the_53_is_the_largest_whole_number() -> None:
    ok = json.dumps({"tasks": [{**TASK, "metrics": {"n": 2**53, "m": -(2**53)}}]}).encode()
    assert load_mission(ok, known_agents=None).ok
    assert _load({"tasks": [{**TASK, "metrics": {"n": 2**53 + 1}}]})[0][0] == "$.tasks[0].metrics.n"


def test_nesting_is_limited_and_deep_documents_do_not_crash() -> None:
    def nested(n: int) -> Any:
        doc: Any = 1
        for _ in range(n):
            doc = {"a": doc}
        return doc
    fits = {"tasks": [{**TASK, "metrics": nested(MAX_DEPTH - 4)}]}
    assert load_mission(json.dumps(fits).encode(), known_agents=None).ok
    [(path, msg)] = _load({"tasks": [{**TASK, "metrics": nested(MAX_DEPTH)}]})
    assert path.startswith("$.tasks[0].metrics.a.a") and "nested too deeply" in msg
    assert _load(b"[" * 100_000 + b"]" * 100_000) == [("$", f"nested too deeply: at most {MAX_DEPTH} levels "
                                                             "of objects and lists")]


def test_other_control_characters_are_data() -> None:
    doc = {"tasks": [{"title": "tab\there", "description": "line 1\nline 2\r\n\x1b[1mbold\x1b[0m"}]}
    r = load_mission(json.dumps(doc).encode(), known_agents=None)
    assert r.spec is not None
    assert r.spec.tasks[0].description == doc["tasks"][0]["description"]


@pytest.mark.parametrize(("raw", "words"), [
    ('{"tasks": []}'.encode("utf-16"), "UTF-16 text"),
    ('{"tasks": []}'.encode("utf-16-le"), "NUL bytes"),
    ('{"tasks": []}'.encode("utf-32"), "UTF-32 text"),
    (b'{"tasks": [{"title": "caf\xe9"}]}', "not UTF-8 text (line 1, column 26)"),
    (b"\xef\xbb\xbf", "file is empty"),
    (b"\xef\xbb\xbf\xef\xbb\xbf{}", "not valid JSON"),  # one BOM is dropped, not two
])
def test_encodings_other_than_utf8_say_so(raw: bytes, words: str) -> None:
    [(path, msg)] = _load(raw)
    assert path == "$" and words in msg


def test_a_bom_loads_like_the_same_file_without_it() -> None:
    raw = json.dumps({"name": "n", "tasks": [TASK]}).encode()
    a = load_mission(raw, known_agents=None).spec
    b = load_mission(b"\xef\xbb\xbf" + raw, known_agents=None).spec
    assert a is not None and a == b
    assert stored_round_trip(b) == b  # what recovery parses back is the same spec


@pytest.mark.parametrize(("field", "value", "words"), [
    ("maxRetries", 101, "less than or equal to 100"),
    ("maxFixAttempts", 1000, "less than or equal to 100"),
    ("priority", 1e7, "less than or equal to 1000000"),
    ("maxDuration", "P11Y", "at most ten years"),
    ("maxDuration", 10**12, "at most ten years"),
    ("deadline", "P20Y", "at most ten years"),
    ("deadline", "9999-12-31T23:59:59-14:00", "year must be between"),
    ("deadline", "0001-01-01T00:00:00+14:00", "year must be between"),
    ("retryPolicy", {"escalateAfter": 10**6}, "less than or equal to 100"),
])
def test_numbers_have_sane_bounds(field: str, value: Any, words: str) -> None:
    problems = _load({"tasks": [{**TASK, field: value}]})
    assert len(problems) == 1 and problems[0][0].startswith(f"$.tasks[0].{field}")
    assert words in problems[0][1]


@pytest.mark.parametrize("doc", [
    {"tasks": [TASK], "team": [{"name": "a", "maxConcurrency": 1001}]},
    {"tasks": [TASK], "team": [{"name": "a", "temperature": 2.5}]},
    {"tasks": [TASK], "team": [{"name": "a", "maxTurns": 10**5}]},
    {"tasks": [TASK], "settings": {"maxRetries": 101}},
    {"tasks": [TASK], "settings": {"maxConcurrency": 10**4}},
    {"tasks": [TASK], "team": [{"name": "a", "timeout": "P100Y"}]},
])
def test_team_and_settings_numbers_are_bounded(doc: dict[str, Any]) -> None:
    assert len(_load(doc)) == 1


def test_a_message_that_echoes_a_huge_string_is_still_one_problem() -> None:
    doc = {"tasks": [{**TASK, "assignTo": "x" * 1_000_000}]}
    r = load_mission(json.dumps(doc).encode(), known_agents=["shell"])
    [p] = r.problems
    assert p.path == "$.tasks[0].assignTo"


def test_check_mission_gives_the_stored_form_and_orjson_can_write_it() -> None:
    raw = json.dumps({"tasks": [{**TASK, "maxRetries": 100, "priority": 1e6, "deadline": "P3660D",
                                 "metrics": {"n": 2**53}}]}).encode()
    v = check_mission(raw, known_agents=None, channels=None)
    assert v.spec is not None and v.reason is None
    orjson.dumps(stored_round_trip(v.spec).model_dump(mode="json"))


def test_the_work_of_validation_is_bounded() -> None:
    # the 300 000-item file used to give 300 000 problems (and half a gigabyte of memory)
    [(path, msg)] = _load({"tasks": [{**TASK, "dependsOn": [10] * 300_000}]})
    assert (path, msg) == ("$.tasks[0].dependsOn", f"too many entries (300000): at most {MAX_ENTRIES} in one list")
    [(path, msg)] = _load({"tasks": [{**TASK, "metrics": {f"k{i}": 1 for i in range(MAX_ENTRIES + 1)}}]})
    assert path == "$.tasks[0].metrics" and "in one object" in msg
    many = {"tasks": [{**TASK, "title": f"t{i}", "dependsOn": list(range(25))} for i in range(MAX_VALUES // 25)]}
    assert _load(many) == [("$", f"too many values: at most {MAX_VALUES} strings, numbers, lists and objects in "
                                 "one mission file")]


@pytest.mark.parametrize(("doc", "path"), [
    ({"tasks": [{**TASK, "title": "x" * 1_000_000}]}, "$.tasks[0].title"),
    ({"name": "n" * 1001, "tasks": [TASK]}, "$.name"),
    ({"tasks": [TASK], "team": [{"name": "a", "model": "m" * 5000}]}, "$.team[0].model"),
    ({"tasks": [TASK, {**TASK, "title": "u", "dependsOn": ["t" * 2000]}]}, "$.tasks[1].dependsOn[0]"),
    ({"tasks": [TASK, {**TASK, "title": "u"}], "checkpoints": [
        {"name": "c", "afterTasks": ["t"], "blocksTasks": ["u"], "message": "m" * 10_001}]},
     "$.checkpoints[0].message"),
])
def test_strings_bound_for_events_and_command_lines_are_refused_when_too_long(doc: Any, path: str) -> None:
    """A 1 MB title was taken in, then its task failed at its first run ("command line too long"): titles, names
    and models (in every event about them, on agents' command lines) and messages are bounded at load."""
    problems = _load(doc)
    assert [p for p, _ in problems] == [path]
    assert problems[0][1].startswith("too long: ") and "at most" in problems[0][1]
    assert len(problems[0][1]) < 300  # the value itself is not repeated


def test_a_title_at_the_limit_loads() -> None:
    assert load_mission(json.dumps({"tasks": [{**TASK, "title": "x" * 1000}]}).encode(), known_agents=None).ok
