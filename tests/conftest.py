"""Shared test set-up: asyncio backend for anyio tests, offline litellm, and daemon helpers."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
