"""Tests too slow for every run (a minute or more of waiting on a third-party program's own timing).

They run only with ``POLPO_LONG_TESTS=1``; the skip reason says how, so a skipped one is never a mystery.
"""

from __future__ import annotations

import os

import pytest

__all__ = ["ENV", "long_test"]

ENV = "POLPO_LONG_TESTS"


def long_test(why: str) -> pytest.MarkDecorator:
    """Skip unless ``POLPO_LONG_TESTS=1``; ``why`` says what takes the time."""
    return pytest.mark.skipif(os.environ.get(ENV) != "1",
                              reason=f"long test ({why}): set {ENV}=1 to run it, e.g. "
                                     f"{ENV}=1 .venv/bin/python -m pytest -k NAME (README: Development)")
