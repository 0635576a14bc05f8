"""The registry of check types: every module of this package that defines a :class:`CheckType` with a ``type``.

Discovery keeps a new check to one module: drop ``polpo/checks/file_content.py`` with its model and ``run``, and
the mission schema accepts it, the pipeline ranks and runs it, the judge knows what it may correct, agents are
told about it. Modules are imported once, in name order, when this module is first imported.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias, Union

from pydantic import Field

import polpo.checks
from polpo.checks.base import CheckType

__all__ = ["CHECKS", "EXPECTATION_TYPES", "Expectation", "check_for", "describe_expectation"]

_SKIP = {"base", "registry", "labels"}


def _discover() -> dict[str, CheckType]:
    found: dict[str, CheckType] = {}
    for info in sorted(pkgutil.iter_modules(polpo.checks.__path__), key=lambda i: i.name):
        if info.name in _SKIP or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"polpo.checks.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, CheckType) and "type" in vars(obj) \
                    and obj.__module__ == module.__name__:
                if obj.type in found:
                    raise RuntimeError(f"two check types named {obj.type!r}")
                found[obj.type] = obj()
    return dict(sorted(found.items(), key=lambda kv: kv[1].rank))  # stable: module order within a rank


CHECKS: dict[str, CheckType] = _discover()
EXPECTATION_TYPES: tuple[str, ...] = tuple(CHECKS)

if TYPE_CHECKING:
    Expectation: TypeAlias = Any
else:
    Expectation = Annotated[Union[tuple(c.model for c in CHECKS.values())], Field(discriminator="type")]  # noqa: UP007


def check_for(type_name: str) -> CheckType:
    """The check type of an expectation's ``type``; KeyError for an unknown one (the schema refuses those)."""
    return CHECKS[type_name]


def describe_expectation(exp: Mapping[str, Any]) -> str:
    """One line telling an agent how its work will be checked, from the expectation's JSON."""
    check = CHECKS.get(str(exp.get("type")))
    return check.describe(exp) if check is not None else str(exp.get("type"))
