"""The store contract, held by every backend (memory, SQLite, PostgreSQL): commit order and event numbering,
upsert and insert-only semantics, every named read, and all-or-nothing batches."""

from __future__ import annotations

import anyio
import orjson
import pytest

from polpo.checks.base import CheckOutcome
from polpo.events import catalog as E
from polpo.events.catalog import Event
from polpo.model.status import (
    AssessmentStatus,
    AttemptKind,
    AttemptStatus,
    GateStatus,
    MissionStatus,
    SourceOutcome,
    TaskStatus,
)
from polpo.store import rows as R
from polpo.store.errors import StoreError
from polpo.store.protocol import CommandRecord, SourceRecord
from tests.support.stores import T0, Backend, assessment, attempt, mission, task, writing

pytestmark = pytest.mark.anyio


def transition(to: str) -> E.TaskTransition:
    return E.TaskTransition(from_="pending", to=to, trigger="test")


async def test_events_are_published_in_commit_order_and_numbered_upwards(backend: Backend) -> None:
    store = await backend.open()
    seen: list[Event] = []
    store.subscribe(seen.append)
    m = mission()
    async with writing(store):
        first = store.submit(store.tx().mission(m).event(E.OrchestratorShutdown(pid=1, unfinished_missions=0)))
        backend.clock.advance(1)
        second = store.submit(store.tx().event(transition("assigned"), mission_id="m", task_id="m:1")
                              .event(transition("in_progress"), mission_id="m", task_id="m:1"))
        await store.flush()  # both may share one batch: order still holds
        third = store.tx().event(transition("done"), mission_id="m", task_id="m:1")
        await store.commit(third)
    seqs = [ev.seq for ev in seen]
    assert [ev.event for ev in seen] == ["orchestrator:shutdown", "task:transition", "task:transition",
                                         "task:transition"]
    assert [ev.data.get("to") for ev in seen[1:]] == ["assigned", "in_progress", "done"]
    assert seqs == [1, 2, 3, 4]
    assert first.events + second.events + third.events == seen  # each tx knows its own stamped events
    assert seen[0].ts == "2026-01-01T00:00:00.000Z" and seen[1].ts == "2026-01-01T00:00:01.000Z"
    store = await backend.open()
    try:
        assert await store.events_after(0) == seen
        assert await store.events_after(seqs[1]) == seen[2:]
        assert await store.events_after(seqs[-1]) == []
        assert await store.events_after(seqs[0], 2) == seen[1:3]  # a page (the cluster's follower reads so)
    finally:
        await store.close()


async def test_a_later_write_wins_but_insert_only_columns_keep_their_first_value(backend: Backend) -> None:
    store = await backend.open()
    m = mission()
    t = task(m, 0)
    a = attempt(t, 1, prompt="first prompt")
    async with writing(store):
        await store.commit(store.tx().mission(m).task(t).attempt(a)
                           .dimensions(t.id, 0, "given", '[{"name": "d1"}]', T0)
                           .baseline(t.id, 2, 80.5, '{"attempt": 1}', T0))
        renamed = mission(name="renamed", status=MissionStatus.COMPLETED)
        t.status, t.reason = TaskStatus.IN_PROGRESS, "first"
        a.prompt, a.status, a.exit_code = "second prompt", AttemptStatus.FINISHED, 3
        await store.commit(store.tx().mission(renamed).attempt(a)
                           .dimensions(t.id, 0, "generated", '[{"name": "d2"}]', T0)
                           .baseline(t.id, 2, 12.0, '{"attempt": 2}', T0))
        t.status, t.reason = TaskStatus.DONE, "last"
        await store.commit(store.tx().task(task(m, 0, TaskStatus.FAILED, reason="in between")).task(t))
        loaded = await store.load_mission("m")
        dims = await store.task_dimensions(t.id, 0)
        baselines = await store.task_baselines(t.id)
    assert loaded is not None
    assert loaded.mission.status is MissionStatus.COMPLETED  # updated
    assert loaded.mission.name == "renamed"
    assert loaded.mission.spec.name == "m"  # the spec is insert-only
    assert loaded.mission.tasks[t.id].status is TaskStatus.DONE  # last write of one batch wins
    assert loaded.mission.tasks[t.id].reason == "last"
    got = loaded.attempts[t.id]
    assert (got.prompt, got.status, got.exit_code) == ("first prompt", AttemptStatus.FINISHED, 3)
    assert dims == ("given", [{"name": "d1"}])  # the dimension set is fixed once chosen
    assert baselines == {2: 80.5}  # a metric's value before the task is measured once, never overwritten


async def test_one_batch_writing_a_record_several_times_keeps_its_last_state_and_first_insert_only_values(
        backend: Backend) -> None:
    store = await backend.open()
    m = mission()
    t = task(m, 0)
    a = attempt(t, 1, prompt="the prompt")
    async with writing(store):
        await store.commit(store.tx().mission(m))
        for status in (TaskStatus.ASSIGNED, TaskStatus.IN_PROGRESS, TaskStatus.REVIEW, TaskStatus.DONE):
            t.status = status
            a.status = AttemptStatus.FINISHED if status is TaskStatus.DONE else AttemptStatus.RUNNING
            a.prompt = "the prompt" if status is TaskStatus.ASSIGNED else "changed later"
            store.submit(store.tx().task(t).attempt(a))  # submitted together: one batch
        await store.flush()
        loaded = await store.load_mission("m")
    assert loaded is not None
    assert loaded.mission.tasks[t.id].status is TaskStatus.DONE
    got = loaded.attempts[t.id]
    assert (got.status, got.prompt) == (AttemptStatus.FINISHED, "the prompt")


async def test_every_named_read(backend: Backend) -> None:
    store = await backend.open()
    m1, m2, m3 = mission("m1", 1), mission("m2", 2, MissionStatus.COMPLETED), mission("m3", 3, MissionStatus.CANCELLING)
    t1, t2 = task(m1, 0, TaskStatus.DONE, score=4.5, attempts=2), task(m1, 1, TaskStatus.REVIEW, judge_used=True)
    old, new = attempt(t1, 1, status=AttemptStatus.INTERRUPTED), attempt(t1, 2, duration=1.5, timed_out=True)
    running = attempt(t2, 1)
    done = assessment(running, 1, AssessmentStatus.COMPLETE)
    open_ = assessment(running, 2)
    check = CheckOutcome(type="command", label="tests", passed=True, message="ok", duration=0.25, index=0,
                         global_score=4.0, scores=[{"dimension": "d", "score": 4}])
    async with writing(store):
        await store.commit(
            store.tx().mission(m3).mission(m1).mission(m2).task(t2).task(t1).attempt(new).attempt(old)
            .attempt(running).assessment(done).assessment(open_).check(open_.id, t2.id, check, T0)
            .gate("m1", "g1", GateStatus.PASSED, "fine", 4.0, T0).gate("m1", "g2", GateStatus.FAILED, None, None, T0)
            .source(SourceRecord("/missions/m1.json", "h1", SourceOutcome.ACCEPTED, "m1", 1, "7:42:99"), T0)
            .source(SourceRecord("/missions/bad.json", "hb", SourceOutcome.REJECTED, None), T0)
            .sla_mark("m1", "warning", "mission", "m1", "{}", T0).sla_mark(t1.id, "met", "task", "m1", "{}", T0)
            .sla_mark("m2:1", "met", "task", "m2", "{}", T0)
            .dimensions(t2.id, 0, "default", '[{"name": "quality", "weight": 1}]', T0)
            .baseline(t2.id, 1, 7.25, "{}", T0).baseline(t2.id, 3, -2.0, "{}", T0).baseline(t1.id, 0, 1.0, "{}", T0))
        cancel = await backend.queue_command("cancel", "m3")
        retry = await backend.queue_command("retry", t1.id)
        await store.commit(store.tx().command_done(cancel, "done", "cancelled", T0))

        assert await store.source("/missions/m1.json") == SourceRecord("/missions/m1.json", "h1",
                                                                       SourceOutcome.ACCEPTED, "m1", 1, "7:42:99")
        assert await store.source("/missions/none.json") is None
        assert sorted(await store.sources_at(["/missions/bad.json", "/missions/m1.json", "/missions/x.json"]),
                      key=lambda s: s.path) == [SourceRecord("/missions/bad.json", "hb", SourceOutcome.REJECTED, None),
                                                await store.source("/missions/m1.json")]
        assert await store.sources_at([]) == []
        assert [await store.mission_exists(mid) for mid in ("m2", "m4")] == [True, False]
        assert await store.last_mission_seq() == 3
        assert await store.open_mission_ids() == ["m1", "m3"]
        assert await store.load_mission("nope") is None
        loaded = await store.load_mission("m1")
        assert loaded is not None
        assert list(loaded.mission.tasks) == [t1.id, t2.id]  # file order
        assert loaded.mission.gate_state == {"g1": GateStatus.PASSED, "g2": GateStatus.FAILED}
        lt1, lt2 = loaded.mission.tasks[t1.id], loaded.mission.tasks[t2.id]
        assert (lt1.status, lt1.score, lt1.attempts, lt2.judge_used) == (TaskStatus.DONE, 4.5, 2, True)
        assert {k: a.id for k, a in loaded.attempts.items()} == {t1.id: new.id, t2.id: running.id}  # the latest
        assert (loaded.attempts[t1.id].duration, loaded.attempts[t1.id].timed_out) == (1.5, True)
        got = await store.open_assessment(running.id)
        assert got is not None and got.id == open_.id
        assert [(c.label, c.passed, c.duration, c.global_score, c.scores) for c in got.checks] == [
            ("tests", True, 0.25, 4.0, [{"dimension": "d", "score": 4}])]
        assert await store.open_assessment(new.id) is None
        assert sorted(await store.sla_marks("m1")) == [("m1", "warning"), (t1.id, "met")]
        assert await store.task_dimensions(t2.id, 0) == ("default", [{"name": "quality", "weight": 1}])
        assert await store.task_dimensions(t2.id, 1) is None
        assert await store.task_baselines(t2.id) == {1: 7.25, 3: -2.0}
        assert await store.task_baselines("m1:9") == {}
        assert await store.queued_commands() == [CommandRecord(retry, "retry", t1.id)]


async def test_an_undecided_assessment_is_open_until_a_persons_verdict_completes_it(backend: Backend) -> None:
    """The judge could not tell: the assessment is stored ``undecided`` (passed unknown), still found as the
    attempt's open assessment with the check's reason, then with the person's verdict written into the check."""
    store = await backend.open()
    m = mission()
    t = task(m, 0, TaskStatus.AWAITING_REVIEW)
    a = attempt(t, 1, status=AttemptStatus.FINISHED)
    undecided = assessment(a, 1, AssessmentStatus.UNDECIDED)
    check = CheckOutcome(type="llm_review", label="greets", passed=False, message="Score 3.00/5", index=0,
                         global_score=3.0, scores=[], undecided="score 3.00 is between 2.00 and 4.00")
    async with writing(store):
        await store.commit(store.tx().mission(m).task(t).attempt(a).assessment(undecided)
                           .check(undecided.id, t.id, check, T0))
        got = await store.open_assessment(a.id)
        assert got is not None and got.status is AssessmentStatus.UNDECIDED
        assert [(c.undecided, c.person, c.status) for c in got.checks] == [
            ("score 3.00 is between 2.00 and 4.00", None, "undecided")]
        person = {"passed": True, "by": "ada", "reason": "fine", "score": None}
        await store.commit(store.tx().check(undecided.id, t.id, CheckOutcome(
            type="llm_review", label="greets", passed=True, message="passed by ada", index=0, global_score=3.0,
            scores=[], person=person), T0))
        got = await store.open_assessment(a.id)
        assert got is not None and [(c.status, c.person) for c in got.checks] == [("passed", person)]
        undecided.status = AssessmentStatus.COMPLETE
        await store.commit(store.tx().assessment(undecided))
        assert await store.open_assessment(a.id) is None


async def test_a_faulty_transaction_is_dropped_alone_and_leaves_no_row_and_no_event(backend: Backend) -> None:
    store = await backend.open()
    seen: list[Event] = []
    store.subscribe(seen.append)
    m = mission()
    good = store.submit(store.tx().mission(m).task(task(m, 0)).event(transition("assigned"), mission_id="m"))
    bad = store.tx().event(transition("done"), mission_id="m")
    bad.ops.append((R.ATTEMPTS, ("m:1/1", "m:1")))  # a row that does not fit its table: the batch fails
    store.submit(bad)
    async with writing(store):  # written again one transaction at a time: only the faulty one is dropped
        await good.done.wait()
        await bad.done.wait()
        worse = store.tx().event(transition("x"), mission_id="m")
        worse.ops.append((R.ATTEMPTS, ("m:1/2",)))
        with pytest.raises(StoreError):
            await store.commit(worse)  # commit says so; the writer goes on
        loaded = await store.load_mission("m")
        assert loaded is not None and loaded.attempts == {}
        assert [e.seq for e in await store.events_after(0)] == [1]
    assert good.error is None and bad.error is not None
    assert [(e.data["to"], e.seq) for e in seen] == [("assigned", 1)]  # the dropped ones' numbers were given back
    assert await backend_events(backend) == seen


async def backend_events(backend: Backend) -> list[Event]:
    store = await backend.open()
    try:
        return await store.events_after(0)
    finally:
        await store.close()


async def test_a_restarted_store_numbers_after_what_is_stored(backend: Backend) -> None:
    if backend.kind == "memory":
        pytest.skip("nothing survives a memory store")
    seqs = []
    for _ in range(3):
        store = await backend.open()
        seen: list[Event] = []
        store.subscribe(seen.append)
        async with writing(store):
            await store.commit(store.tx().event(transition("assigned")).event(transition("done")))
            backend.clock.advance(1)
        seqs += [ev.seq for ev in seen]
    assert seqs == [1, 2, 3, 4, 5, 6]
    assert [ev.seq for ev in await backend_events(backend)] == seqs


async def test_stored_rows_read_back_with_the_types_they_were_written_with(backend: Backend) -> None:
    store = await backend.open()
    m = mission()
    t = task(m, 0, TaskStatus.DONE, score=3.0, expectations=[{"type": "file_exists", "path": "x"}])
    a = attempt(t, 1, pid=123, pid_ticks=2**40, exit_code=0, duration=2.0, files={"created": ["x"]},
                tokens=10, cost=0.5, outcomes=[{"type": "file", "path": "x"}])
    async with writing(store):
        await store.commit(store.tx().mission(m).task(t).attempt(a)
                           .event(E.OrchestratorShutdown(pid=7, unfinished_missions=1)))
        loaded = await store.load_mission("m")
        events = await store.events_after(0)
    assert loaded is not None
    lt, la = loaded.mission.tasks[t.id], loaded.attempts[t.id]
    assert (lt.score, lt.expectations) == (3.0, [{"type": "file_exists", "path": "x"}])
    assert (la.pid, la.pid_ticks, la.duration, la.files, la.tokens, la.cost, la.outcomes) == (
        123, 2**40, 2.0, {"created": ["x"]}, 10, 0.5, [{"type": "file", "path": "x"}])
    assert events[0].data == {"pid": 7, "unfinishedMissions": 1}
    assert orjson.dumps(events[0].data) == orjson.dumps({"pid": 7, "unfinishedMissions": 1})


async def test_concurrent_commits_are_all_stored_and_published_in_order(backend: Backend) -> None:
    store = await backend.open()
    seen: list[Event] = []
    store.subscribe(seen.append)

    async def producer(name: str) -> None:
        for i in range(30):
            await store.commit(store.tx().event(transition(f"{name}{i}")))

    async with writing(store):
        async with anyio.create_task_group() as tg:
            for name in "abc":
                tg.start_soon(producer, name)
        stored = await store.events_after(0)
    assert stored == seen and len(seen) == 90
    assert [e.seq for e in seen] == list(range(1, 91))
    for name in "abc":  # one producer's commits keep their order
        assert [e.data["to"] for e in seen if e.data["to"][0] == name] == [f"{name}{i}" for i in range(30)]


async def test_a_loaded_mission_carries_the_spend_its_rows_record(backend: Backend) -> None:
    """What the report sums after a restart: every attempt's and review's spend, each row once (a review row
    written again replaces the earlier), the same as `polpo show` reads."""
    store = await backend.open()
    m = mission("m1", 1)
    t1 = task(m, 0, TaskStatus.REVIEW)
    first = attempt(t1, 1, status=AttemptStatus.FINISHED, model="openai/x", tokens=1100, tokens_in=1000,
                    tokens_out=100, cost=0.25)
    fix = attempt(t1, 2, model="openai/x", tokens=550, tokens_in=500, tokens_out=50, cost=0.125)
    fix.kind = AttemptKind.FIX
    quiet = attempt(task(m, 1), 1)  # a command agent: no LLM call
    async with writing(store):
        tx = store.tx().mission(m).task(t1).task(task(m, 1)).attempt(first).attempt(fix).attempt(quiet)
        tx.review(f"{first.id}/as1", 0, 0, t1.id, "openai/j", True, "{}", T0, tokens_in=300, tokens_out=30, cost=0.5)
        tx.review(f"{first.id}/as1", 0, 0, t1.id, "openai/j", True, "{}", T0, tokens_in=400, tokens_out=40, cost=0.5)
        tx.review(f"{first.id}/judge", -1, 0, t1.id, "local", True, "{}", T0, tokens_in=70, tokens_out=7)
        await store.commit(tx)
        loaded = await store.load_mission("m1")
    assert loaded is not None
    spend = loaded.mission.spent.summary()
    assert spend["total"] == {"tokensIn": 1970, "tokensOut": 197, "usd": 0.875, "costUnknown": ["local"]}
    assert {p: t["usd"] for p, t in spend["byPhase"].items()} == {"agent": 0.25, "review": 0.5, "fixes": 0.125,
                                                                  "retries": 0.0}


async def test_questions_are_stored_updated_and_read_back_and_only_asked_ones_fall_due(backend: Backend) -> None:
    from datetime import timedelta

    from polpo.clock import iso
    from polpo.model.questions import Question, QuestionKind, QuestionStatus

    store = await backend.open()
    m1 = mission("m1", 1)
    t1 = task(m1, 0, TaskStatus.AWAITING_ANSWER, questions=2)
    snapshot = {"messages": [{"role": "user", "content": "go"}], "pending": [], "turn": 3, "outcomes": []}
    asked = Question("m1:1/2/q", t1.id, "m1", "m1:1/2", QuestionKind.QUESTION, "ask_human", "Which port?",
                     T0 + timedelta(seconds=5), snapshot=snapshot, expires_at=T0 + timedelta(seconds=60))
    tool = Question("m1:1/1/q", t1.id, "m1", "m1:1/1", QuestionKind.TOOL, "tool", "git.git_commit", T0,
                    arguments={"message": "v1"}, expires_at=T0 + timedelta(seconds=30), approved=False,
                    status=QuestionStatus.ANSWERED, answer="no", answered_by="bob", answered_at=T0)
    async with writing(store):
        await store.commit(store.tx().mission(m1).task(t1).question(tool).question(asked))
        asked.status, asked.answer, asked.delivered_in, asked.result = QuestionStatus.DELIVERED, "8080", "m1:1/3", "r"
        asked.snapshot = {"changed": True}  # insert-only: the conversation is written once
        await store.commit(store.tx().question(asked))
        both = await store.task_questions(t1.id)
        assert [(q.id, q.kind, q.status, q.approved) for q in both] == [
            ("m1:1/1/q", QuestionKind.TOOL, QuestionStatus.ANSWERED, False),
            ("m1:1/2/q", QuestionKind.QUESTION, QuestionStatus.DELIVERED, None)]
        assert both[0].arguments == {"message": "v1"} and both[0].expires_at == T0 + timedelta(seconds=30)
        assert (both[1].answer, both[1].delivered_in, both[1].result, both[1].snapshot) == ("8080", "m1:1/3", "r",
                                                                                            snapshot)
        loaded = await store.load_mission("m1")
        assert loaded is not None and loaded.mission.tasks[t1.id].questions == 2
        later = Question("m1:1/4/q", t1.id, "m1", "m1:1/4", QuestionKind.QUESTION, "output", "Which db?", T0,
                         expires_at=T0 + timedelta(seconds=10))
        await store.commit(store.tx().question(later))
        assert await store.due_questions(iso(T0 + timedelta(seconds=11))) == [
            ("m1:1/4/q", t1.id, "m1", "question")]  # answered and delivered ones never fall due
        assert await store.due_questions(iso(T0 + timedelta(seconds=9))) == []
