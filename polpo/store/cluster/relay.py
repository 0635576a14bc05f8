"""Commands given to a node that does not lead (its HTTP API): queued in the shared command inbox, which the
leader applies, and the answer awaited — the same path ``polpo retry/cancel/approve`` take without an API."""

from __future__ import annotations

from typing import Any

import anyio

__all__ = ["relay_command"]


async def relay_command(pool: Any, kind: str, target: str, *, wait: float = 10.0) -> tuple[str, str]:
    cid = await pool.fetchval("INSERT INTO commands (kind, target, created_at) "
                              "VALUES ($1, $2, to_char(clock_timestamp() AT TIME ZONE 'UTC', "
                              "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')) RETURNING id", kind, target)
    with anyio.move_on_after(wait):
        while True:
            row = await pool.fetchrow("SELECT status, result FROM commands WHERE id = $1", cid)
            if row is not None and row["status"] != "queued":
                return str(row["status"]), str(row["result"])
            await anyio.sleep(0.1)
    return "done", f"queued {kind} {target}; the leader has not applied it yet (see polpo status)"
