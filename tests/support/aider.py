"""The real ``aider`` CLI in tests: where its virtualenv is, the README's argv for it, and scripted replies.

aider (PyPI ``aider-chat``) lives in its own virtualenv ``.venv-aider`` at the repo root, because it pins its own
litellm; ``.ci/run`` creates it from ``requirements-aider.txt``.

:data:`AIDER_COMMAND` and :data:`AIDER_ENV` are the README's ``[agents.aider]`` recipe (a test checks that they
match). Each flag is there for a reason found by running aider 0.86.2 and reading its source:

* ``--no-git``: otherwise aider finds the nearest ``.git`` above the workspace (the clone that holds polpo's
  state), writes files relative to *that* repository's root, ``git add``s them, appends ``.aider*`` to its
  ``.gitignore`` and sets ``user.name``/``user.email`` in its config; with no repository at all, ``--yes-always``
  makes it ``git init`` one. With ``--no-git`` the root is the working directory, i.e. the workspace.
* ``--yes-always``: one message, no questions (stdin is polpo's JSON, not a person). It does *not* say yes to
  running shell commands (aider asks those with "explicit yes required").
* ``--model``: without it and without a provider key aider offers an OpenRouter login in a browser and waits on
  port 8484; with it, a missing key fails the model call at once.
* ``--edit-format whole``: with ``--no-git`` aider shows the model no file it was not given, so the model
  rewrites whole files instead of search/replace blocks against text it has not seen.
* ``--no-check-update``: with ``--yes-always`` a newer release on PyPI would be ``pip install``\\ ed into aider's
  own environment, then aider exits.
* ``--no-analytics``: otherwise ``--yes-always`` answers yes to the analytics opt-in.
* ``--no-show-release-notes``, ``--no-show-model-warnings``: both offer a web page, and ``--yes-always`` opens it.
* ``--no-detect-urls``: a URL in the prompt would be fetched and added to the chat.
* ``--no-suggest-shell-commands``: such commands are never run under ``--yes-always``; do not ask for them.
* ``--no-pretty``, ``--no-fancy-input``: plain output for polpo's stdout tail; no terminal prompt on a pipe.
* ``--chat-history-file /dev/null``, ``--input-history-file /dev/null``: otherwise ``.aider.chat.history.md``
  and ``.aider.input.history`` land in the workspace and count as the attempt's changed files.
* ``BROWSER=true``: aider still "opens" any URL found in a model error (e.g. the API-key page after a 401);
  this makes that a no-op.
* ``LITELLM_LOCAL_MODEL_COST_MAP=True``: litellm would download its model price list from GitHub at import.

aider exits 0 when the model call fails (after ~85 s of retries when the endpoint is unreachable, at once on an
authentication error); the reason is only on its stdout.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO

__all__ = [
    "AIDER_BIN",
    "AIDER_COMMAND",
    "AIDER_ENV",
    "AIDER_VENV",
    "README_MODEL",
    "agent_toml",
    "aider_command",
    "message_of",
    "model_metadata",
    "require_aider",
    "whole_file",
]

AIDER_VENV = REPO / ".venv-aider"
AIDER_BIN = AIDER_VENV / "bin" / "aider"

#: The model the README's recipe names; tests put their own in its place.
README_MODEL = "openai/gpt-4o-mini"

AIDER_COMMAND: tuple[str, ...] = (
    "aider", "--model", README_MODEL, "--edit-format", "whole",
    "--no-git", "--yes-always", "--no-check-update", "--no-analytics",
    "--no-show-release-notes", "--no-show-model-warnings", "--no-detect-urls", "--no-suggest-shell-commands",
    "--no-pretty", "--no-fancy-input",
    "--chat-history-file", "/dev/null", "--input-history-file", "/dev/null",
    "--message", "{prompt}",
)  # fmt: skip

AIDER_ENV: Mapping[str, str] = {"BROWSER": "true", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def require_aider() -> Path:
    """The aider executable; skips the test when ``.venv-aider`` is missing, except in CI, where it fails."""
    if AIDER_BIN.exists():
        return AIDER_BIN
    reason = (f"aider is not installed in {AIDER_VENV} (`.ci/run` installs it; by hand: python3 -m venv "
              ".venv-aider && .venv-aider/bin/pip install -r requirements-aider.txt)")
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def aider_command(model: str) -> list[str]:
    """The README's argv with the venv's aider and ``model`` in place of the README's model."""
    argv = list(AIDER_COMMAND)
    argv[0] = os.fspath(AIDER_BIN)
    argv[argv.index("--model") + 1] = model
    return argv


def agent_toml(name: str, command: Sequence[str], env: Mapping[str, str], *, timeout: float) -> str:
    """A ``[agents.NAME]`` command-agent table (JSON strings and arrays are valid TOML)."""
    env_items = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in env.items())
    return (f'[agents.{name}]\ntype = "command"\ncommand = {json.dumps(list(command))}\n'
            f"env = {{ {env_items} }}\ntimeout = {timeout}\n")


def model_metadata(home: Path, model: str) -> Path:
    """``~/.aider.model.metadata.json`` in ``home`` declaring ``model``: aider then neither warns about an unknown
    model nor downloads litellm's price list from GitHub to look it up."""
    path = home / ".aider.model.metadata.json"
    path.write_text(json.dumps({model: {
        "max_input_tokens": 128000, "max_output_tokens": 16384, "input_cost_per_token": 0.0,
        "output_cost_per_token": 0.0, "litellm_provider": model.split("/", 1)[0], "mode": "chat"}}))
    return path


def whole_file(path: str, content: str, *, note: str = "Here is the file.") -> str:
    """A model reply in aider's "whole" edit format: a line with the path, then the file inside a ``` fence."""
    if "```" in content:
        raise ValueError("content must not contain a ``` fence")
    body = content if content.endswith("\n") else content + "\n"
    return f"{note}\n\n{path}\n```\n{body}```\n"


def message_of(request: Mapping[str, Any]) -> str:
    """The last user message of a chat request: aider's ``--message`` text, followed by its format reminder."""
    for message in reversed(request.get("messages") or []):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""
