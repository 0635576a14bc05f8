"""What an MCP server can fail with, apart from the SDK (which costs a second to import: only a daemon that uses a
server loads it)."""

from __future__ import annotations

__all__ = ["McpCallError", "McpStartError"]


class McpStartError(Exception):
    """The server could not start, or not finish its handshake and tool list in time (the message says why)."""


class McpCallError(Exception):
    """A call that got no result (the message says why); the model is told."""
