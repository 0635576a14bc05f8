"""Fixtures the LLM agent's and the review panel's tests share: a workspace folder and the fake provider's key."""

from __future__ import annotations

from pathlib import Path

import pytest

FAKE_KEY_ENV = "POLPO_TEST_FAKE_LLM_KEY"  # a name that does not look secret: redaction must still catch its value
FAKE_KEY = "sk-test-abc123def456ghi789"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace folder."""
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def fake_llm_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """The fake provider's key in its variable (use with ``pytestmark = pytest.mark.usefixtures(...)``)."""
    monkeypatch.setenv(FAKE_KEY_ENV, FAKE_KEY)
    return FAKE_KEY
