"""Where the tests find real MCP servers, started as their users start them: ``mcp-server-git`` and
``mcp-server-time`` from PyPI (the dev lock installs them in the venv), ``mcp-server-filesystem`` and
``mcp-server-everything`` from npm (``.ci/run`` installs them into ``.ci/npm``, from its package-lock.json), all on
the ``PATH`` the daemon gets; and the tests' own faulty server (:mod:`tests.support.mcp_faulty`).

Missing npm servers skip their tests, except in CI (``CI=true``), where that is a failure.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

__all__ = ["FAULTY", "NPM_BIN", "faulty_command", "mcp_path", "need_npm_servers"]

REPO = Path(__file__).resolve().parents[2]
NPM_BIN = REPO / ".ci" / "npm" / "node_modules" / ".bin"
VENV_BIN = Path(sys.executable).parent
FAULTY = Path(__file__).with_name("mcp_faulty.py")


def mcp_path() -> str:
    """A PATH on which every server's command is found by its plain name."""
    return os.pathsep.join([str(VENV_BIN), str(NPM_BIN), os.environ.get("PATH", "/usr/bin:/bin")])


def need_npm_servers() -> None:
    if (NPM_BIN / "mcp-server-everything").exists() and (NPM_BIN / "mcp-server-filesystem").exists():
        return
    if os.environ.get("CI"):
        pytest.fail("CI must have the npm MCP servers (.ci/run installs them: npm ci --prefix .ci/npm)")
    pytest.skip("no npm MCP servers: npm ci --prefix .ci/npm")


def faulty_command(mode: str) -> tuple[str, list[str]]:
    """(command, args) of the faulty server in ``mode``."""
    return sys.executable, [str(FAULTY), mode]
