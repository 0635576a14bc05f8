"""The one error a person's command answers with when it does not apply (resume, approve, reject, override)."""

from __future__ import annotations

__all__ = ["Refused"]


class Refused(Exception):
    """A command that does not apply to the state it met; the message says why and what to do next."""
