"""The check registry's cheap index agrees with the check modules, and validating a mission loads no check.

The index (:data:`polpo.checks.registry.INDEX`) is written by hand so that validation does not import every
check; these tests import every module of ``polpo.checks`` the way discovery used to and fail on any drift.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path
from typing import get_args

import polpo.checks
from polpo.checks.base import CheckType
from polpo.checks.registry import CHECKS, EXPECTATION_TYPES, INDEX, check_for, describe_expectation

REPO = Path(__file__).resolve().parents[2]


def discovered() -> dict[str, type[CheckType]]:
    """Every concrete check type any module of the package defines, by kind."""
    found: dict[str, type[CheckType]] = {}
    for info in pkgutil.iter_modules(polpo.checks.__path__):
        module = importlib.import_module(f"polpo.checks.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, CheckType) and "type" in vars(obj) \
                    and obj.__module__ == module.__name__:
                assert obj.type not in found, f"two check types named {obj.type!r}"
                found[obj.type] = obj
    return found


def test_every_check_type_is_in_the_index_and_every_indexed_kind_has_a_check_type() -> None:
    assert set(discovered()) == set(INDEX)


def test_the_index_names_each_kinds_own_model_module_and_rank() -> None:
    for kind, cls in discovered().items():
        entry = INDEX[kind]
        assert cls.model is entry.model, kind
        assert cls.__module__ == f"polpo.checks.{entry.module}", kind
        assert cls.rank == entry.rank, kind
        assert get_args(entry.model.model_fields["type"].annotation) == (kind,), kind


def test_the_index_lists_cheaper_kinds_first() -> None:
    ranks = [INDEX[k].rank for k in EXPECTATION_TYPES]
    assert ranks == sorted(ranks)


def test_check_for_returns_the_kinds_check_and_refuses_an_unknown_kind() -> None:
    for kind, cls in discovered().items():
        assert type(check_for(kind)) is cls and CHECKS[kind] is check_for(kind)
    assert list(CHECKS) == list(EXPECTATION_TYPES) and "nope" not in CHECKS and CHECKS.get("nope") is None
    try:
        check_for("nope")
    except KeyError:
        pass
    else:
        raise AssertionError("an unknown kind must raise KeyError")
    assert describe_expectation({"type": "nope"}) == "nope"
    assert describe_expectation({"type": "file_exists", "path": "a.txt"}) == "file_exists: a.txt"


def _fresh_python(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLPO_")}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                         check=True)
    return out.stdout.strip()


def test_validating_a_mission_with_every_kind_imports_no_check_module() -> None:
    code = """
import sys
from polpo.mission.loader import load_mission
raw = b'''{"tasks": [{"title": "t", "description": "d", "expectations": [
  {"type": "file_exists", "path": "a"}, {"type": "file_content", "path": "a", "expected": "x"},
  {"type": "test", "command": "true"}, {"type": "script", "command": "true"},
  {"type": "llm_review", "criteria": "good"}]}]}'''
assert load_mission(raw, known_agents=None).ok
print(sorted(m for m in sys.modules if m.startswith(("polpo.checks.", "polpo.review", "polpo.tools", "asyncio"))))
"""
    # polpo.review.keys is the one leaf validation shares with the judge: how a dimension's name is matched
    assert _fresh_python(code) == ("['polpo.checks.expectations', 'polpo.checks.registry', 'polpo.review', "
                                   "'polpo.review.keys']")


def test_a_check_module_is_imported_when_its_kind_is_first_used() -> None:
    code = """
import sys
from polpo.checks.registry import check_for
check_for("script")
print(sorted(m for m in sys.modules if m.startswith("polpo.checks.")))
"""
    assert _fresh_python(code) == ("['polpo.checks.base', 'polpo.checks.command', 'polpo.checks.expectations', "
                                   "'polpo.checks.labels', 'polpo.checks.registry']")
