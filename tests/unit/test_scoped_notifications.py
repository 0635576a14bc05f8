"""Mission- and task-scoped notification rules: the schema, the checks against the config, and the routing."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from polpo.events.catalog import Event
from polpo.intake.scoped import scoped_problems
from polpo.mission.loader import LoadResult, load_mission
from polpo.mission.schema import MissionSpec
from polpo.model.doc import MissionDoc
from polpo.model.records import Mission, Task
from polpo.model.status import MissionStatus, TaskStatus
from polpo.notify.channels import Notification, event_json, summarize
from polpo.notify.config import NotifyRule
from polpo.notify.scopes import ScopeRegistry, render_template, resolve, scopes_of


def rule(events: list[str], channels: list[str], **extra: Any) -> dict[str, Any]:
    return {"events": events, "channels": channels, **extra}


def doc(mission_rules: list[dict[str, Any]] | None = None, task_rules: list[dict[str, Any]] | None = None,
        **scope: Any) -> dict[str, Any]:
    task: dict[str, Any] = {"title": "a", "description": "d"}
    if task_rules is not None:
        task["notifications"] = {"rules": task_rules, **scope}
    out: dict[str, Any] = {"tasks": [task, {"title": "b", "description": "d"}]}
    if mission_rules is not None:
        out["notifications"] = {"rules": mission_rules, **scope}
    return out


def load(d: dict[str, Any]) -> LoadResult:
    return load_mission(json.dumps(d).encode(), known_agents=None)


def spec_of(d: dict[str, Any]) -> MissionSpec:
    r = load(d)
    assert r.problems == [] and r.spec is not None, r.problems
    return r.spec


# ------------------------------------------------------------------------------------------------ schema
def test_polpo_names_are_mapped_with_a_warning() -> None:
    r = load(doc([rule(["plan:completed", "plan:*", "mission:executed", "task:*"], ["ops"])]))
    assert r.spec is not None and r.spec.notifications is not None
    assert r.spec.notifications.rules[0].events == ["mission:completed", "mission:*", "mission:accepted", "task:*"]
    assert r.warnings == [
        '$.notifications.rules[0].events[0]: "plan:completed" is Polpo\'s name; polpo calls this event '
        '"mission:completed" and uses that',
        '$.notifications.rules[0].events[1]: "plan:*" is Polpo\'s name; polpo calls this event "mission:*" and '
        "uses that",
        '$.notifications.rules[0].events[2]: "mission:executed" is Polpo\'s name; polpo calls this event '
        '"mission:accepted" and uses that',
    ]


def test_polpo_rule_fields_polpo_ignores_are_warned_about() -> None:
    r = load(doc(task_rules=[rule(["task:*"], ["ops"], id="r1", name="R", severity="critical",
                                  template="t", condition={"field": "x"}, cooldownMs=5)]))
    assert r.spec is not None
    assert r.warnings == ["$.tasks[0].notifications.rules[0].condition: Polpo field not implemented by polpo; "
                          "ignored", "$.tasks[0].notifications.rules[0].cooldownMs: Polpo field not implemented "
                          "by polpo; ignored"]
    assert r.spec.tasks[0].notifications is not None and r.spec.tasks[0].notifications.inherit is True


@pytest.mark.parametrize(("notifications", "path", "message"), [
    ({"rules": [{"events": ["x"]}]}, "$.notifications.rules[0].channels", "required field missing"),
    ({"rules": [{"events": [], "channels": ["a"]}]}, "$.notifications.rules[0].events", "must list at least"),
    ({"rules": [rule(["x"], ["a"], severity="loud")]}, "$.notifications.rules[0].severity", "must be"),
    ({"rules": [], "inherti": True}, "$.notifications.inherti", 'unknown key; did you mean "inherit"?'),
    ({"rules": [rule(["x"], ["a"])], "inherit": "no"}, "$.notifications.inherit", "must be true or false"),
])
def test_bad_notifications_have_paths(notifications: dict[str, Any], path: str, message: str) -> None:
    r = load({"tasks": [{"title": "a", "description": "d"}], "notifications": notifications})
    assert r.spec is None
    assert [(p.path, p.message[:len(message)]) for p in r.problems] == [(path, message)]


def test_unknown_channels_and_events_are_problems_with_paths() -> None:
    spec = spec_of(doc([rule(["mission:completed", "nope:*", "notification:*"], ["ops", "pager"])],
                       [rule(["task:transition"], ["ops", "tg"])]))
    found = [(p.path, p.message) for p in scoped_problems(spec, {"ops", "audit"})]
    assert found == [
        ("$.notifications.rules[0].events[1]", '"nope:*" matches no polpo event (see `polpo tail`, or the '
                                               "event list in docs/reference/events.md)"),
        ("$.notifications.rules[0].events[2]", '"notification:*": notification:* events report deliveries and are '
                                               "never routed (that could loop)"),
        ("$.notifications.rules[0].channels[1]", 'no channel named "pager"; available: audit, ops (or add [channels.pager])'),
        ("$.tasks[0].notifications.rules[0].channels[1]", 'no channel named "tg"; available: audit, ops (or add [channels.tg])'),
    ]
    assert [p.path for p in scoped_problems(spec, None)] == ["$.notifications.rules[0].events[1]",
                                                              "$.notifications.rules[0].events[2]"]


# ----------------------------------------------------------------------------------------------- routing
def mission(d: dict[str, Any], mid: str = "m") -> Mission:
    spec = spec_of(d)
    now = datetime(2026, 3, 1, tzinfo=UTC)
    m = Mission(id=mid, seq=1, name=mid, source=f"/x/{mid}.json", hash="h", run=1, doc=MissionDoc.of(spec),
                workspace=Path("/tmp"), status=MissionStatus.RUNNING, created_at=now)
    for i, ts in enumerate(spec.tasks):
        t = Task(id=f"{mid}:{i + 1}", mission_id=mid, idx=i, title=ts.title, agent="a", doc=m.doc,
                 status=TaskStatus.PENDING, updated_at=now)
        m.tasks[t.id] = t
    return m


def ev(name: str, mid: str | None = "m", tid: str | None = None, **data: Any) -> Event:
    return Event(seq=1, ts="2026-03-01T12:00:00.000Z", event=name, mission_id=mid, task_id=tid, data=data)


CONFIG = [NotifyRule(events=["task:*", "mission:*"], channels=["global"])]


def channels(m: Mission, name: str, tid: str | None = None, extra: tuple[str, ...] = ()) -> list[str]:
    return [t.channel for t in resolve(name, CONFIG, scopes_of(m), tid, extra)]


def test_scoped_rules_add_to_the_config_by_default() -> None:
    m = mission(doc([rule(["mission:completed"], ["mission-ch", "global"])],
                    [rule(["task:transition"], ["task-ch"])]))
    assert channels(m, "mission:completed") == ["mission-ch", "global"]
    assert channels(m, "task:transition", "m:1") == ["task-ch", "global"]
    assert channels(m, "task:transition", "m:2") == ["global"]  # task b has no rules of its own
    assert channels(m, "task:transition") == ["global"]
    assert channels(m, "sla:warning", extra=("ops",)) == ["ops"]
    assert channels(m, "notification:sent", extra=("ops",)) == []


def test_inherit_false_lets_matching_scoped_rules_win() -> None:
    m = mission(doc([rule(["mission:completed", "task:transition"], ["mission-ch"])],
                    [rule(["task:transition"], ["task-ch"])], inherit=False))
    assert channels(m, "mission:completed") == ["mission-ch"]
    assert channels(m, "task:transition", "m:1") == ["task-ch"]  # the task's rule wins over mission and config
    assert channels(m, "task:transition", "m:2") == ["mission-ch"]
    assert channels(m, "mission:accepted") == ["global"]  # no scoped rule matches: the config's rules apply
    assert channels(m, "mission:completed", extra=("gate-ch",)) == ["mission-ch", "gate-ch"]


def test_the_most_specific_rule_gives_the_summary() -> None:
    m = mission(doc([rule(["task:*"], ["ch"], template="mission says {{to}}")],
                    [rule(["task:transition"], ["ch"], id="t1", template="task {{taskId}} is {{to}}")]))
    targets = resolve("task:transition", CONFIG, scopes_of(m), "m:1")
    assert [(t.channel, t.rule.id if t.rule else None) for t in targets] == [("ch", "t1"), ("global", None)]
    note = Notification(ev("task:transition", tid="m:1", to="done"), targets[0].rule)
    assert summarize(note) == "task m:1 is done"
    assert event_json(note)["rule"] == {"id": "t1", "severity": "info"}
    assert "rule" not in event_json(Notification(note.event))


def test_render_template_reads_event_fields() -> None:
    e = ev("mission:completed", outcome="completed", report={"summary": "2/2 done", "tasks": [{"t": "a"}]})
    data = e.to_json_dict()
    assert render_template("{{missionId}}: {{ outcome }} / {{data.report.summary}} {{report.tasks.0.t}}", data) \
        == "m: completed / 2/2 done a"
    assert render_template("{{nope}} {{report}}", data) == '{{nope}} {"summary":"2/2 done","tasks":[{"t":"a"}]}'


def test_the_registry_keeps_a_finished_missions_rules_until_its_completion_is_routed() -> None:
    m = mission(doc([rule(["mission:completed"], ["ch"])]))
    board: dict[str, Mission] = {"m": m}
    reg = ScopeRegistry(board.get)
    assert reg.for_event(ev("mission:accepted")) == scopes_of(m)
    del board["m"]  # the board forgets a finished mission before mission:completed is published
    found = reg.for_event(ev("mission:completed"))
    assert found is not None and found.mission is not None and found.mission.rules[0].channels == ["ch"]
    reg.after(ev("mission:completed"))
    assert len(reg) == 0 and reg.for_event(ev("mission:completed")) is None
    assert reg.for_event(ev("mission:rejected", mid="other")) is None and len(reg) == 0  # nothing cached
    assert reg.for_event(ev("orchestrator:started", mid=None)) is None


def test_the_registry_learns_missions_loaded_after_a_restart_and_refreshes_on_resume() -> None:
    plain = mission(doc())
    board: dict[str, Mission] = {"m": plain}
    reg = ScopeRegistry(board.get)
    assert reg.for_event(ev("task:transition", tid="m:1")) is None  # cached: no rules
    board["m"] = mission(doc(task_rules=[rule(["task:*"], ["ch"])]))
    assert reg.for_event(ev("task:transition", tid="m:1")) is None  # from the cache
    found = reg.for_event(ev("mission:resumed"))
    assert found is not None and list(found.tasks) == ["m:1"]
