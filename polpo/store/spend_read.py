"""A mission's spend read from the store for the CLI and the API (``polpo status``, ``polpo show``, the web view,
``polpo metrics``): its attempts' and reviews' spend columns, summed by :func:`polpo.model.spend.mission_spend`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from polpo.model.spend import AttemptSpend, ReviewSpend, mission_spend
from polpo.store.read import Conn

__all__ = ["spend"]


def spend(con: Conn, mids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each mission's spend (:func:`polpo.model.spend.mission_spend`), from its attempts' and reviews' rows."""
    if not mids:
        return {}
    marks = ", ".join("?" for _ in mids)
    attempts: dict[str, list[AttemptSpend]] = {m: [] for m in mids}
    reviews: dict[str, list[ReviewSpend]] = {m: [] for m in mids}
    for r in con.execute("SELECT mission_id, task_id, kind, agent, model, tokens, tokens_in, tokens_out, cost, "
                         f"finished_at FROM attempts WHERE mission_id IN ({marks}) AND (tokens IS NOT NULL OR cost IS "
                         "NOT NULL)", tuple(mids)):
        spent = AttemptSpend.of(*r[1:])
        if spent is not None:
            attempts[r[0]].append(spent)
    for r in con.execute("SELECT t.mission_id, r.task_id, r.assessment_id, r.model, r.tokens_in, r.tokens_out, "
                         f"r.cost, r.created_at FROM reviews r JOIN tasks t ON t.id = r.task_id WHERE t.mission_id IN "
                         f"({marks})", tuple(mids)):
        role = "judge" if str(r[2]).endswith("/judge") else "reviewer"
        reviews[r[0]].append(ReviewSpend(r[1], role, r[3], r[4] or 0, r[5] or 0, r[6], r[7]))
    return {m: mission_spend(attempts[m], reviews[m]) for m in mids}
