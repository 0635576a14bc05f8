"""Events are bounded and always encodable: long text, long lists, huge numbers and surrogates are cut or escaped
with a visible marker, and the result is valid JSON."""

from __future__ import annotations

import orjson

from polpo.events.catalog import MissionCompleted, MissionRejected, TaskCreated
from polpo.events.pipeline import MAX_EVENT, MAX_ITEMS, MAX_TEXT, MORE_KEY, event_data


def _encoded(data: dict[str, object]) -> bytes:
    return orjson.dumps(data)


def test_small_events_are_unchanged() -> None:
    data = event_data(TaskCreated(title="a\nb", agent="shell", depends_on=["x", "y"], priority=1.0))
    assert data == {"title": "a\nb", "agent": "shell", "dependsOn": ["x", "y"], "priority": 1.0}


def test_a_long_string_is_cut_with_a_marker() -> None:
    data = event_data(TaskCreated(title="x" * (MAX_TEXT + 123), agent="a", depends_on=[], priority=1.0))
    assert data["title"] == "x" * MAX_TEXT + "… (123 more characters)"


def test_a_long_list_is_cut_with_a_marker() -> None:
    deps = [f"t{i}" for i in range(MAX_ITEMS + 7)]
    data = event_data(TaskCreated(title="t", agent="a", depends_on=deps, priority=1.0))
    assert data["dependsOn"][:MAX_ITEMS] == deps[:MAX_ITEMS]
    assert data["dependsOn"][MAX_ITEMS:] == ["… (7 more)"]


def test_a_wide_object_is_cut_with_a_marker_key() -> None:
    report = {f"k{i}": i for i in range(MAX_ITEMS + 5)}
    data = event_data(MissionCompleted(outcome="completed", all_passed=True, report=report))
    assert len(data["report"]) == MAX_ITEMS + 1
    assert data["report"][MORE_KEY] == "(5 more)"


def test_the_whole_event_is_bounded_even_with_many_medium_strings() -> None:
    errors = [{"path": f"$.tasks[{i}]", "message": "m" * 10_000} for i in range(MAX_ITEMS)]
    lines = ["l" * 10_000] * MAX_ITEMS
    data = event_data(MissionRejected(file="f", hash="h", reason="invalid", errors=errors, lines=lines))
    raw = _encoded(data)
    assert len(raw) < MAX_EVENT + 64 * 1024  # the budget plus markers and structure
    assert data["errors"][-1].endswith("more)") and data["lines"][-1].endswith("more)")
    assert orjson.loads(raw) == data


def test_huge_integers_and_surrogates_become_text() -> None:
    report = {"big": 10**30, "neg": -(2**63) - 1, "fine": 2**64 - 1, "text": "a\ud800b", "enormous": 10**5000}
    data = event_data(MissionCompleted(outcome="x", all_passed=False, report=report))
    assert data["report"]["big"] == str(10**30)
    assert data["report"]["neg"] == str(-(2**63) - 1)
    assert data["report"]["fine"] == 2**64 - 1
    assert data["report"]["text"] == "a\\ud800b"
    assert data["report"]["enormous"] == "(a whole number of about 5001 digits)"
    assert orjson.loads(_encoded(data)) == data
