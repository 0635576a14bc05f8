"""Start-up speed for the commands that build pydantic models (validate, submit, schema): no plugin discovery.

On its first model pydantic looks for plugins: it imports ``importlib.metadata`` and reads the entry points of
every installed package (~20 ms of `polpo validate`'s ~0.17 s). polpo uses no pydantic plugin, and a plugin
only observes validation, so a verdict is the same without one. The daemon keeps pydantic's discovery: this
runs only in a ``polpo`` process (:class:`polpo.cli.LazyGroup`), before the command's module is imported.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable
from typing import Any

__all__ = ["skip_discovery"]

_LOADER = "pydantic.plugin._loader"  # where pydantic 2 looks plugins up (get_plugins), imported on first use


def _no_plugins() -> Iterable[Any]:
    return ()


def skip_discovery() -> bool:
    """Answer pydantic's plugin lookup with "none" without scanning; False if pydantic already looked."""
    if _LOADER in sys.modules:
        return False
    stub = types.ModuleType(_LOADER, "polpo's stand-in: no pydantic plugins (polpo.cli.pydantic_plugins)")
    stub.get_plugins = _no_plugins  # type: ignore[attr-defined]
    sys.modules[_LOADER] = stub
    return True
