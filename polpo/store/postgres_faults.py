"""Which PostgreSQL errors are an outage: the server or the way to it is gone for now, and the same work will
succeed once it is back (refused, reset or closed connections, a server shutting down, starting up or out of
connections, a timeout). Anything else is an answer about the work itself and is not retried.

Pure: it looks at the exception only. asyncpg is imported by the caller's module, never here, so the CLI and
the SQLite daemon do not load it.
"""

from __future__ import annotations

__all__ = ["OUTAGE_SQLSTATES", "is_outage"]

# SQLSTATE classes and codes (PostgreSQL appendix A): 08 connection exception, 53 insufficient resources,
# 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now, 57P05 idle session timeout.
OUTAGE_SQLSTATES = ("08", "53", "57P01", "57P02", "57P03", "57P05")


def is_outage(e: BaseException) -> bool:
    if isinstance(e, OSError):  # refused, reset, unreachable, and TimeoutError (a subclass)
        return True
    state = getattr(e, "sqlstate", None)
    if isinstance(state, str) and state.startswith(OUTAGE_SQLSTATES):
        return True
    name = type(e).__name__
    # asyncpg's InterfaceError for a connection that closed under it carries no SQLSTATE, only its words; its
    # InternalClientError is a connection whose protocol state a lost server left confused (seen after a
    # restart: "cannot switch to state 11; another operation is in progress"): a new connection works
    return (name == "InterfaceError" and "closed" in str(e)) or name == "InternalClientError"
