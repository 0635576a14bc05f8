"""The registry of check types: a cheap index of the kinds, and each kind's check loaded when it is first used.

Validating a mission needs only the expectation models (:mod:`polpo.checks.expectations`, pydantic only);
running a check needs its module, which may pull in processes, threads or the judge panel. So the index names
each kind's model and the module under ``polpo.checks`` that defines its :class:`CheckType`, and
:func:`check_for` imports that module the first time the kind is run, described or corrected:
``polpo validate`` loads no check at all. ``tests/unit/test_check_registry.py`` imports every module of the
package and fails if a check type is missing from the index, or the index names a kind, model or rank that no
check module defines.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias, Union

from pydantic import Field

from polpo.checks.expectations import (
    FileContentExpectation,
    FileExistsExpectation,
    LlmReviewExpectation,
    MetricExpectation,
    ScriptExpectation,
    TestExpectation,
)

if TYPE_CHECKING:
    from polpo.checks.base import CheckType, ExpectationModel

__all__ = ["CHECKS", "EXPECTATION_TYPES", "INDEX", "Expectation", "Kind", "check_for", "describe_expectation"]


@dataclass(frozen=True, slots=True)
class Kind:
    """One index entry: the model a mission's expectation of this kind is validated with, the module (under
    ``polpo.checks``) whose :class:`CheckType` runs it, and that type's rank."""

    model: ExpectationModel
    module: str
    rank: int


# kind → entry, cheapest rank first (stable: module name order within a rank), as the schema lists them
INDEX: dict[str, Kind] = {
    "file_content": Kind(FileContentExpectation, "file_content", 0),
    "file_exists": Kind(FileExistsExpectation, "file_exists", 0),
    "test": Kind(TestExpectation, "command", 1),
    "script": Kind(ScriptExpectation, "command", 1),
    "metric": Kind(MetricExpectation, "metric", 1),
    "llm_review": Kind(LlmReviewExpectation, "llm_review", 2),
}
EXPECTATION_TYPES: tuple[str, ...] = tuple(INDEX)

if TYPE_CHECKING:
    Expectation: TypeAlias = Any
else:
    Expectation = Annotated[Union[tuple(k.model for k in INDEX.values())], Field(discriminator="type")]  # noqa: UP007

_loaded: dict[str, CheckType] = {}


def check_for(type_name: str) -> CheckType:
    """The check type of an expectation's ``type`` (its module imported on first use); KeyError for an unknown
    one (the schema refuses those)."""
    check = _loaded.get(type_name)
    if check is None:
        from polpo.checks.base import CheckType

        module = importlib.import_module(f"polpo.checks.{INDEX[type_name].module}")
        cls = next((obj for obj in vars(module).values() if isinstance(obj, type) and issubclass(obj, CheckType)
                    and vars(obj).get("type") == type_name), None)
        if cls is None:
            raise LookupError(f"polpo.checks.{INDEX[type_name].module} defines no check type {type_name!r}")
        check = _loaded[type_name] = cls()
    return check


class _Checks(Mapping[str, "CheckType"]):
    """Every check type by kind, in rank order; a value's module is imported when it is looked up."""

    def __getitem__(self, key: str) -> CheckType:
        return check_for(key)

    def __iter__(self) -> Iterator[str]:
        return iter(INDEX)

    def __len__(self) -> int:
        return len(INDEX)

    def __contains__(self, key: object) -> bool:
        return key in INDEX


CHECKS: Mapping[str, CheckType] = _Checks()


def describe_expectation(exp: Mapping[str, Any]) -> str:
    """One line telling an agent how its work will be checked, from the expectation's JSON."""
    kind = str(exp.get("type"))
    return check_for(kind).describe(exp) if kind in INDEX else kind
