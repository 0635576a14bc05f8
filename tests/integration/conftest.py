"""Fixtures the LLM agent's and the review panel's tests share: a workspace folder, the fake provider's key, a
fake judge."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from polpo.llm.client import load_litellm
from tests.support.fake_llm import FakeLLM

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


@pytest.fixture
async def judge_llm() -> AsyncIterator[FakeLLM]:
    """A FakeLLM for judges (models ``fake-model``, ``a``, ``b``, ``c``), litellm imported first so that no
    test's own time limits pay for the import; an exception in its responder fails the test."""
    await load_litellm()
    with FakeLLM(models=("fake-model", "a", "b", "c")) as server:
        yield server
        assert server.errors == []
