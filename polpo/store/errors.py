"""The store's one error type, in a module of its own so the CLI's PostgreSQL reader can raise it without
importing the protocol (whose record and event imports cost ~190 ms of a ``polpo status``)."""

from __future__ import annotations

__all__ = ["StoreError"]


class StoreError(RuntimeError):
    """The store cannot be used (closed, newer schema, unwritable, unreachable)."""
