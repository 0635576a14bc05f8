"""The kinds of things that wait for a person, one function each, over the rows :mod:`polpo.store.attention_read`
gives (pure: no store, no clock). :data:`SOURCES` lists them, most urgent first; see :mod:`polpo.attention.items`
for how to add one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from polpo.attention.items import Action, Item, Source, task_state

__all__ = ["SOURCES", "approvals", "checkpoints", "on_hold", "questions", "rejected_files", "reviews"]


def _q(ident: str) -> str:
    return quote(ident, safe="")


def _task_item(t: dict[str, Any], kind: str, todo: str, commands: tuple[str, ...],
               actions: tuple[Action, ...]) -> Item:
    return Item(kind=kind, state=task_state(t["status"], t.get("waiting_for")), title=t["title"], todo=todo,
                commands=commands, mission_id=t["mission_id"], task_id=t["id"], since=t.get("updated_at"),
                detail=t.get("reason"), actions=actions)


def approvals(tasks: list[dict[str, Any]]) -> Iterator[Item]:
    """Tasks awaiting a person's approval: before their first attempt ("approval": "before"), or before a fix or
    retry of work with side effects (``sideEffects``)."""
    for t in tasks:
        if t["status"] != "awaiting_approval":
            continue
        tid, path = t["id"], f"/api/tasks/{_q(t['id'])}"
        approve = Action("Approve", f"{path}/approve", field="note", placeholder="note (optional)")
        if t.get("waiting_for") == "tool":
            yield _task_item(t, "approval", f"its agent waits to make a tool call (polpo show {tid} has its "
                             "arguments): approve the call, or refuse it with a reason the agent is told",
                             (f"polpo approve {tid}", f"polpo reject {tid} --reason TEXT"),
                             (approve, Action("Refuse", f"{path}/reject", field="reason", required=True,
                                              placeholder="reason (required: the agent is told)")))
        elif t.get("waiting_for") == "side_effects":
            yield _task_item(t, "approval", "its work has side effects: approve its next attempt, or cancel the "
                             "mission", (f"polpo approve {tid}", f"polpo cancel {t['mission_id']}"), (approve,))
        else:
            yield _task_item(t, "approval", "approve its first attempt, or reject it with a reason",
                             (f"polpo approve {tid}", f"polpo reject {tid} --reason TEXT"),
                             (approve, Action("Reject", f"{path}/reject", field="reason", required=True,
                                              placeholder="reason (required)")))


def questions(tasks: list[dict[str, Any]]) -> Iterator[Item]:
    """Tasks whose agent asked a person a question (``ask_human``, or a command agent's output that asks): the
    agent goes on with the answer."""
    for t in tasks:
        if t["status"] != "awaiting_answer":
            continue
        tid = t["id"]
        yield _task_item(t, "question", "its agent asks a question: answer it and the agent goes on with the answer",
                         (f'polpo answer {tid} "…"',),
                         (Action("Answer", f"/api/tasks/{_q(tid)}/answer", field="answer", required=True,
                                 placeholder="your answer (required)"),))


def reviews(tasks: list[dict[str, Any]]) -> Iterator[Item]:
    """Tasks whose work the judge could not tell good from bad (``awaiting_review``): a person passes or fails it,
    and their verdict becomes a label for the next ``polpo calibrate --write``."""
    for t in tasks:
        if t["status"] != "awaiting_review":
            continue
        tid, path = t["id"], f"/api/tasks/{_q(t['id'])}"
        yield _task_item(t, "review", "the judge could not tell: look at the work and the reviewers' evidence "
                         f"(polpo show {tid}), then pass it or fail it with a reason",
                         (f"polpo approve {tid}", f"polpo reject {tid} --reason TEXT"),
                         (Action("Approve", f"{path}/approve", field="note", placeholder="note (optional)"),
                          Action("Fail", f"{path}/reject", field="reason", required=True,
                                 placeholder="reason (required: the next attempt is told)")))


_HOLDS = {  # what a task on hold waits for → what to do
    "budget": "it reached its own budget: raise it and it goes on",
    "judge": "the judge could not assess its work: retry when the judge is reachable (the agent does not run again)",
    "provider": "its model provider stayed unreachable: retry when it is back",
}


def on_hold(tasks: list[dict[str, Any]]) -> Iterator[Item]:
    """Tasks on hold: over their budget (``onBudget: "hold"``), or after the judge or the agent's model stayed
    unreachable."""
    for t in tasks:
        if t["status"] != "on_hold":
            continue
        tid, why = t["id"], t.get("waiting_for")
        retry = f"/api/tasks/{_q(tid)}/retry"
        if why == "budget":
            yield _task_item(t, "on_hold", _HOLDS["budget"], (f"polpo retry {tid} --budget USD",),
                             (Action("Raise budget and go on", retry, field="usd", required=True,
                                     placeholder="new budget in USD"),))
        else:
            yield _task_item(t, "on_hold", _HOLDS.get(why or "", "retry it when what it waited for is back"),
                             (f"polpo retry {tid}",), (Action("Retry", retry),))


def checkpoints(holds: list[dict[str, Any]]) -> Iterator[Item]:
    """Checkpoints a running mission reached: the tasks they block wait for a person to resume them."""
    for h in holds:
        mid, name = h["mission_id"], h["name"]
        yield Item(kind="checkpoint", state="paused at checkpoint", title=name, mission_id=mid, since=h.get("at"),
                   todo="check the work before it, then resume the mission there",
                   commands=(f"polpo resume {mid} {name}",),
                   actions=(Action(f"Resume {name}", f"/api/missions/{_q(mid)}/resume", {"checkpoint": name},
                                   field="note", placeholder="note (optional)"),))


def rejected_files(sources: list[dict[str, Any]]) -> Iterator[Item]:
    """Mission files in the missions folder that the daemon rejected (still there, unchanged since)."""
    for s in sources:
        yield Item(kind="rejected_file", state="file rejected", title=s["path"], since=s.get("seen_at"),
                   detail=s.get("reason") or "see `polpo tail` for the reasons",
                   todo="fix the file and save it (the daemon reads it again), or remove it",
                   commands=(f"polpo validate {s['path']}",))


SOURCES: tuple[Source, ...] = (
    Source("question", "tasks", questions),
    Source("approval", "tasks", approvals),
    Source("review", "tasks", reviews),
    Source("checkpoint", "checkpoints", checkpoints),
    Source("on_hold", "tasks", on_hold),
    Source("rejected_file", "rejected", rejected_files),
)
"""Every kind of thing that waits for a person, in the order the list shows them."""
