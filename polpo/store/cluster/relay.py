"""Commands given to a node that does not lead (its HTTP API): queued in the shared command inbox, which the
leader applies, and the answer awaited — the same path ``polpo retry/cancel/approve`` take without an API."""

from __future__ import annotations

from typing import Any

import anyio

from polpo.store.errors import StoreUnavailable
from polpo.store.postgres_faults import is_outage

__all__ = ["relay_command"]


async def relay_command(pool: Any, kind: str, target: str, *, wait: float = 10.0) -> tuple[str, str]:
    """(status, answer); through a database outage the command is not queued and :class:`StoreUnavailable` says
    so (the API answers 503: ask again), and a command queued before the outage keeps waiting for its answer."""
    try:
        return await _relay(pool, kind, target, wait)
    except Exception as e:
        if is_outage(e):
            raise StoreUnavailable(f"the command {kind} {target} could not be relayed to the leader: the database "
                                   f"is unavailable ({type(e).__name__}: {e}); try again once it is back") from e
        raise


async def _relay(pool: Any, kind: str, target: str, wait: float) -> tuple[str, str]:
    cid = await pool.fetchval("INSERT INTO commands (kind, target, created_at) "
                              "VALUES ($1, $2, to_char(clock_timestamp() AT TIME ZONE 'UTC', "
                              "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')) RETURNING id", kind, target)
    with anyio.move_on_after(wait):
        while True:
            try:
                row = await pool.fetchrow("SELECT status, result FROM commands WHERE id = $1", cid)
            except Exception as e:  # it is queued: the leader applies it once the database is back
                if not is_outage(e):
                    raise
                row = None
            if row is not None and row["status"] != "queued":
                return str(row["status"]), str(row["result"])
            await anyio.sleep(0.1 if row is not None else 1.0)
    return "done", f"queued {kind} {target}; the leader has not applied it yet (see polpo status)"
