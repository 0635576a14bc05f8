"""The store's one error type, in a module of its own so the CLI's PostgreSQL reader can raise it without
importing the protocol (whose record and event imports cost ~190 ms of a ``polpo status``)."""

from __future__ import annotations

__all__ = ["StoreError", "StoreUnavailable"]


class StoreError(RuntimeError):
    """The store cannot be used (closed, newer schema, unwritable, unreachable)."""


class StoreUnavailable(StoreError):
    """A write failed for a reason that may pass (disk full, read-only or unreachable database): the writer keeps
    the batch and tries again, and nothing new starts meanwhile."""
