"""The field suite's model server: the one `scripts/field_model.py serve` started (it exports POLPO_FIELD_*).

Without it (the README's test command on a machine that has not started one) every field test is skipped, and
the reason says how to run them; .ci/run starts the server and runs ``pytest tests/field`` as its own step.
"""

from __future__ import annotations

import os
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

SKIP = ("field test on a real model: no local model server (POLPO_FIELD_API_BASE is unset); run "
        '`eval "$(python3 scripts/field_model.py serve)" && .venv/bin/python -m pytest tests/field` '
        "(the first serve downloads and builds for 10–35 min; .ci/run does all of it)")


@dataclass(frozen=True)
class FieldModel:
    api_base: str  # http://127.0.0.1:PORT/v1
    model: str  # the litellm model string: openai/<the server's alias>
    context: int  # the server's context window, in tokens
    server: str  # llama-server or llama-cpp-python
    log: Path  # the server's own log


@pytest.fixture(scope="session")
def field_model() -> FieldModel:
    base = os.environ.get("POLPO_FIELD_API_BASE")
    if not base:
        pytest.skip(SKIP)
    try:  # the variables are set: a dead server is a failure, not a skip
        with urllib.request.urlopen(f"{base}/models", timeout=10) as resp:
            assert resp.status == 200
    except OSError as exc:
        pytest.fail(f"POLPO_FIELD_API_BASE={base} does not answer ({exc}): is the server still running?")
    return FieldModel(api_base=base, model=os.environ["POLPO_FIELD_MODEL"],
                      context=int(os.environ["POLPO_FIELD_CONTEXT"]), server=os.environ["POLPO_FIELD_SERVER"],
                      log=Path(os.environ["POLPO_FIELD_LOG"]))
