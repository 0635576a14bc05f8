"""Start-up speed for the commands that build pydantic models (validate, submit, schema): no plugin discovery.

On its first model pydantic looks for plugins: it imports ``importlib.metadata`` (~30 ms) and reads the entry
points of every installed package. polpo uses no pydantic plugin, and a plugin only observes validation, so a
verdict is the same without one. The daemon keeps pydantic's discovery: this runs only in a ``polpo`` process
(:class:`polpo.cli.LazyGroup`), before the command's module is imported.

Two layers, so a pydantic release that moves things costs speed, never correctness:
- pydantic's documented switch ``PYDANTIC_DISABLE_PLUGINS`` (unless the user set it): no entry-point scan;
- a stand-in for the private module ``pydantic.plugin._loader`` that answers ``get_plugins`` with "none" without
  importing ``importlib.metadata``. Only under pydantic 2, and any other name pydantic asks of it is served by the
  real module, loaded then.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import types
from typing import Any

__all__ = ["skip_discovery"]

_LOADER = "pydantic.plugin._loader"  # where pydantic 2 looks plugins up (get_plugins), imported on first use


def _get_plugins(*_args: Any, **_kwargs: Any) -> tuple[()]:
    return ()


def _real_loader() -> types.ModuleType:
    """pydantic's own ``_loader``, loaded from its file (the name in ``sys.modules`` is the stand-in's)."""
    import pydantic.plugin

    spec = importlib.machinery.PathFinder.find_spec("_loader", list(pydantic.plugin.__path__))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot find {_LOADER}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _delegate(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_real_loader(), name)


def skip_discovery() -> bool:
    """Make pydantic skip plugin discovery; True if the stand-in is in place (False: the switch alone)."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if _LOADER in sys.modules:
        return False
    from pydantic.version import VERSION

    if not VERSION.startswith("2."):
        return False
    stub = types.ModuleType(_LOADER, "polpo's stand-in: no pydantic plugins (polpo.cli.pydantic_plugins)")
    stub.get_plugins = _get_plugins  # type: ignore[attr-defined]
    setattr(stub, "__getattr__", _delegate)  # noqa: B010 - a module's __getattr__ (PEP 562)
    sys.modules[_LOADER] = stub
    return True
