"""Optional extras (``pip install 'polpo[NAME]'``): a feature asked for without its library installed is one line
that names the feature and the pip command, found before anything starts, never an ImportError's traceback.

The check looks for the modules (``importlib.util.find_spec``) without importing them, so it costs a start-up
nothing when the extra is there and is not used.
"""

from __future__ import annotations

import importlib.util

__all__ = ["EXTRAS", "MissingExtra", "missing_modules", "require"]

# extra -> (what it brings, in words; the modules that must be importable)
EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "postgres": ("the PostgreSQL driver", ("asyncpg",)),
    "otel": ("OpenTelemetry", ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http")),
}


class MissingExtra(Exception):
    """A configured feature needs an extra that is not installed; the message is the whole explanation."""


def missing_modules(modules: tuple[str, ...]) -> list[str]:
    absent = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # a parent package is missing
            found = False
        if not found:
            absent.append(name)
    return absent


def require(extra: str, feature: str, hint: str = "") -> None:
    """Raise :class:`MissingExtra` when ``extra`` is not installed: ``FEATURE needs WHAT: pip install 'polpo[X]'``."""
    what, modules = EXTRAS[extra]
    if missing_modules(modules):
        raise MissingExtra(f"{feature} needs {what}: pip install 'polpo[{extra}]'{hint}")
