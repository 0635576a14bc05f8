"""What waits for a person: each source over stored rows, the list's order, the states people read."""

from __future__ import annotations

from polpo.attention.items import Source, gather, mission_state, task_state
from polpo.attention.sources import (
    SOURCES,
    approvals,
    checkpoints,
    on_hold,
    questions,
    rejected_files,
    reviews,
)
from polpo.engine.lifecycle import WAITS_FOR, Trigger, waiting_for
from polpo.model.status import TaskStatus


def task(tid: str, status: str, waiting: str | None, at: str = "2026-01-01T00:00:00Z") -> dict[str, object]:
    return {"id": tid, "mission_id": tid.split(":")[0], "title": f"title of {tid}", "agent": "shell",
            "status": status, "waiting_for": waiting, "reason": f"why {tid}", "updated_at": at}


def test_an_approval_before_says_approve_or_reject_with_the_commands_and_buttons() -> None:
    [item] = approvals([task("m:1", "awaiting_approval", "approval"), task("m:2", "pending", None)])
    assert (item.kind, item.state, item.task_id, item.mission_id) == ("approval", "waiting for approval", "m:1", "m")
    assert item.commands == ("polpo approve m:1", "polpo reject m:1 --reason TEXT")
    assert [(a.label, a.path, a.field, a.required) for a in item.actions] == [
        ("Approve", "/api/tasks/m%3A1/approve", "note", False), ("Reject", "/api/tasks/m%3A1/reject", "reason", True)]
    assert item.detail == "why m:1"


def test_side_effects_are_approved_or_the_mission_cancelled_never_rejected() -> None:
    [item] = approvals([task("m:3", "awaiting_approval", "side_effects")])
    assert item.commands == ("polpo approve m:3", "polpo cancel m")
    assert [a.label for a in item.actions] == ["Approve"]


def test_an_agents_question_is_answered_and_its_tool_call_approved_or_refused() -> None:
    [asked] = questions([task("m:1", "awaiting_answer", "question"), task("m:2", "awaiting_approval", "tool")])
    assert (asked.kind, asked.state, asked.commands) == ("question", "waiting for an answer", ('polpo answer m:1 "…"',))
    assert [(a.label, a.path, a.field, a.required) for a in asked.actions] == [
        ("Answer", "/api/tasks/m%3A1/answer", "answer", True)]
    [call] = approvals([task("m:2", "awaiting_approval", "tool")])
    assert "tool call" in call.todo and call.commands == ("polpo approve m:2", "polpo reject m:2 --reason TEXT")
    assert [a.label for a in call.actions] == ["Approve", "Refuse"]
    assert waiting_for(TaskStatus.IN_PROGRESS, Trigger.ASK) == "question"
    assert waiting_for(TaskStatus.IN_PROGRESS, Trigger.ASK_TOOL) == "tool"
    assert waiting_for(TaskStatus.REVIEW, Trigger.ASK_REVIEW) == "review"


def test_work_the_judge_could_not_tell_is_passed_or_failed_by_a_person() -> None:
    [item] = reviews([task("m:1", "awaiting_review", None), task("m:2", "awaiting_approval", "approval")])
    assert (item.kind, item.state, item.task_id) == ("review", "waiting for review", "m:1")
    assert item.commands == ("polpo approve m:1", "polpo reject m:1 --reason TEXT") and "polpo show m:1" in item.todo
    assert [(a.label, a.path, a.field, a.required) for a in item.actions] == [
        ("Approve", "/api/tasks/m%3A1/approve", "note", False), ("Fail", "/api/tasks/m%3A1/reject", "reason", True)]
    assert [s.kind for s in SOURCES].index("review") < [s.kind for s in SOURCES].index("on_hold")


def test_a_task_on_hold_says_what_it_waits_for_and_how_to_go_on() -> None:
    items = {i.task_id: i for i in on_hold([task("m:1", "on_hold", "budget"), task("m:2", "on_hold", "judge"),
                                            task("m:3", "on_hold", "provider"), task("m:4", "on_hold", None),
                                            task("m:5", "awaiting_approval", "approval")])}
    assert sorted(items) == ["m:1", "m:2", "m:3", "m:4"]
    assert items["m:1"].state == "on hold: budget" and items["m:1"].commands == ("polpo retry m:1 --budget USD",)
    assert items["m:1"].actions[0].field == "usd" and items["m:1"].actions[0].required
    assert items["m:2"].state == "on hold: judge" and "the agent does not run again" in items["m:2"].todo
    assert items["m:3"].state == "on hold: model provider" and items["m:3"].commands == ("polpo retry m:3",)
    assert items["m:4"].state == "on hold"  # a row written before waiting_for existed


def test_a_reached_checkpoint_is_resumed_by_name() -> None:
    [item] = checkpoints([{"mission_id": "deploy", "name": "go-live", "at": "2026-01-01T00:00:00Z"}])
    assert (item.state, item.title, item.commands) == ("paused at checkpoint", "go-live",
                                                       ("polpo resume deploy go-live",))
    assert item.actions[0].body == {"checkpoint": "go-live"}


def test_a_rejected_file_says_why_and_how_to_check_it() -> None:
    [item] = rejected_files([{"path": "/m/typo.json", "reason": "invalid: $.tasks[0]: unknown agent",
                              "seen_at": "2026-01-01T00:00:00Z"}])
    assert (item.state, item.title, item.detail) == ("file rejected", "/m/typo.json", "invalid: $.tasks[0]: unknown agent")
    assert item.commands == ("polpo validate /m/typo.json",) and item.actions == ()


def test_gather_keeps_the_sources_order_and_oldest_first_within_one() -> None:
    rows = {"tasks": [task("b:1", "on_hold", "judge", "2026-01-01T00:00:02Z"),
                      task("a:1", "awaiting_approval", "approval", "2026-01-01T00:00:03Z"),
                      task("c:1", "awaiting_approval", "approval", "2026-01-01T00:00:01Z")],
            "checkpoints": [{"mission_id": "d", "name": "cp", "at": "2026-01-01T00:00:00Z"}],
            "rejected": [{"path": "/m/x.json", "reason": None, "seen_at": "2026-01-01T00:00:00Z"}]}
    assert [(i.kind, i.target) for i in gather(rows, SOURCES)] == [
        ("approval", "c:1"), ("approval", "a:1"), ("checkpoint", "d"), ("on_hold", "b:1"),
        ("rejected_file", "/m/x.json")]
    assert gather({}, SOURCES) == []


def test_a_new_source_is_one_function_over_its_rows() -> None:
    from polpo.attention.items import Item

    def questions(rows: list[dict[str, object]]) -> list[Item]:
        return [Item(kind="question", state="waiting for an answer", title=str(r["text"]), todo="answer it",
                     commands=(f"polpo answer {r['id']} TEXT",)) for r in rows]

    rows = {"questions": [{"id": "q1", "text": "Which port?"}]}
    [item] = gather(rows, (*SOURCES, Source("question", "questions", questions)))
    assert item.to_json()["commands"] == ["polpo answer q1 TEXT"]


def test_states_people_read_instead_of_running() -> None:
    assert task_state("awaiting_approval", "approval") == "waiting for approval"
    assert task_state("on_hold", "budget") == "on hold: budget"
    assert task_state("in_progress", None) == "in_progress"
    [hold] = on_hold([task("m:1", "on_hold", "budget")])
    assert mission_state("running", [hold]) == "on hold: budget"
    assert mission_state("running", []) == "running"
    assert mission_state("completed", [hold]) == "completed"


def test_what_a_task_waits_for_follows_its_step_and_ends_with_the_next() -> None:
    S, T = TaskStatus, Trigger
    assert waiting_for(S.PENDING, T.ASK_APPROVAL) == "approval"
    assert waiting_for(S.REVIEW, T.BLOCK) == "side_effects"
    assert waiting_for(S.REVIEW, T.BUDGET_HOLD) == "budget"
    assert waiting_for(S.REVIEW, T.OUTAGE) == "judge"
    assert waiting_for(S.IN_PROGRESS, T.OUTAGE) == "provider"
    assert waiting_for(S.AWAITING_APPROVAL, T.APPROVE) is None and waiting_for(S.ON_HOLD, T.REASSESS) is None
    from polpo.engine.lifecycle import next_state

    for (state, trigger), why in WAITS_FOR.items():  # every wait is a step into a state a person must act on
        assert next_state(state, trigger) in (S.AWAITING_APPROVAL, S.AWAITING_ANSWER, S.AWAITING_REVIEW, S.ON_HOLD), why


def test_validate_warns_of_a_review_without_a_judge_and_a_channel_not_configured_yet() -> None:
    import json

    from polpo.intake.check import check_mission

    raw = json.dumps({"name": "m", "tasks": [
        {"title": "a", "description": "x", "assignTo": "shell"},
        {"title": "b", "description": "x", "assignTo": "shell", "expectations": [
            {"type": "llm_review", "criteria": "good", "threshold": 3}]}],
        "checkpoints": [{"name": "c", "afterTasks": ["a"], "blocksTasks": ["b"], "notifyChannels": ["ops"]}]})
    v = check_mission(raw.encode(), known_agents=["shell"], channels=set(), judge=False)
    assert [(p.path, p.message) for p in v.problems] == [
        ("$.checkpoints[0].notifyChannels[0]", 'no channel named "ops": the config has none; add a [channels.ops] '
                                               "table first (docs/how-to/notifications.md)")]
    ok = check_mission(raw.replace('"notifyChannels": ["ops"]', '"notifyChannels": []').encode(),
                       known_agents=["shell"], channels=set(), judge=False)
    assert ok.spec is not None and [w for w in ok.warnings if "judge" in w] == [
        "$.tasks[1]: its llm_review check needs a judge and the config has none, so the task would wait on hold "
        "once its agent has run; set [judge] model in the config (or POLPO_JUDGE_MODEL) first"]
    with_judge = check_mission(raw.replace('"notifyChannels": ["ops"]', '"notifyChannels": []').encode(),
                               known_agents=["shell"], channels=set(), judge=True)
    assert not [w for w in with_judge.warnings if "judge" in w]


def test_a_failed_attempts_reason_names_the_failing_check_not_what_the_agent_printed() -> None:
    from polpo.assessment.feedback import failure_reason
    from polpo.checks.base import CheckOutcome

    check = CheckOutcome(type="file_exists", label="out.txt", passed=False, message="out.txt does not exist")
    ok = CheckOutcome(type="test", label="pytest", passed=True, message="ok")
    assert failure_reason([ok, check], 0, False, None) == "check file_exists out.txt failed: out.txt does not exist"
    assert failure_reason([check, check], 2, False, None) == (
        "check file_exists out.txt failed: out.txt does not exist (and 1 more failed check(s)); "
        "the agent exited with code 2")
    assert failure_reason([], None, True, None) == "the agent ran past its time limit"
    assert failure_reason([], None, False, "no such program") == "the agent could not run: no such program"
