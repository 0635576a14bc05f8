"""The name a dimension is matched on, wherever it is written (mission validation, the reviewers' answers, a
checklist's questions). A leaf module: validating a mission loads nothing of the judge."""

from __future__ import annotations

import re

__all__ = ["dim_key"]


def dim_key(name: str) -> str:
    """``"Code Quality"``, ``code_quality`` and ``code-quality`` are the same dimension."""
    key = re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")
    return key or name.strip().lower()
