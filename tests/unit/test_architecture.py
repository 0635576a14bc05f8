"""The shape of the code: no import cycle, small modules, SQL only in the store.

The import graph is read with ``ast`` from the sources, so it counts every import: module-level ones,
function-level ones and those under ``TYPE_CHECKING`` — a cycle hidden inside a function is still a cycle.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "polpo"
MAX_LINES = 400
SIZE_REASON = "Longer than 400 lines because"  # what a module's docstring must say to be allowed more
SQL = re.compile(r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX)|"
                 r"ALTER\s+TABLE|PRAGMA\s)", re.IGNORECASE | re.DOTALL)


def modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = modules()


def imports_of(name: str, path: Path) -> Iterator[str]:
    """Every polpo module ``name`` imports, wherever the import statement is."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in MODULES:
                t = t.rpartition(".")[0]
            if t.startswith("polpo") and t != name:
                yield t


def graph() -> dict[str, set[str]]:
    return {name: set(imports_of(name, path)) for name, path in MODULES.items()}


def package_of(module: str) -> str:
    """The package a module belongs to (a top-level module is its own node)."""
    if MODULES[module].name == "__init__.py":
        return module
    parent = module.rpartition(".")[0]
    return module if parent == "polpo" else parent


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                return [*stack[stack.index(m):], m]
            if m not in state and (found := visit(m)):
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if n not in state and (found := visit(n)):
            return found
    return None


def test_the_import_graph_sees_function_level_and_type_checking_imports(tmp_path: Path) -> None:
    src = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from polpo.engine.board import MissionBoard\n"
           "def f():\n    import polpo.clock\n    from polpo.store import rows\n")
    p = tmp_path / "probe.py"
    p.write_text(src)
    assert set(imports_of("polpo.probe", p)) == {"polpo.engine.board", "polpo.clock", "polpo.store.rows"}


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle_between_modules() -> None:
    assert find_cycle(graph()) is None


def test_no_import_cycle_between_packages() -> None:
    edges: dict[str, set[str]] = {}
    for name, targets in graph().items():
        src = package_of(name)
        edges.setdefault(src, set()).update(p for t in targets if (p := package_of(t)) != src)
    assert find_cycle(edges) is None


def test_no_module_over_400_lines_without_a_reason() -> None:
    too_long = []
    for name, path in MODULES.items():
        text = path.read_text()
        doc = ast.get_docstring(ast.parse(text)) or ""
        if text.count("\n") > MAX_LINES and SIZE_REASON not in doc:
            too_long.append(f"{name}: {text.count(chr(10))} lines")
    assert not too_long


def test_no_sql_outside_the_store() -> None:
    found = []
    for name, path in MODULES.items():
        if name.startswith("polpo.store"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
                found.append(f"{name}:{node.lineno}: {node.value[:60]!r}")
    assert not found


def test_the_backend_neutral_store_knows_no_claims() -> None:
    """The cluster's claim writes ride in a ``Tx`` through its generic ``put`` (their tables and SQL live in
    ``polpo.store.claim_writes``): the transaction, its rows, its SQL and the backends' writers name no claim."""
    found = []
    for name in ("tx", "rows", "sql", "core", "sqlite", "postgres"):
        path = MODULES[f"polpo.store.{name}"]
        for node in ast.walk(ast.parse(path.read_text())):
            names = {ast.Name: lambda n: n.id, ast.Attribute: lambda n: n.attr, ast.FunctionDef: lambda n: n.name,
                     ast.ImportFrom: lambda n: n.module or "", ast.alias: lambda n: n.name}
            get = names.get(type(node))
            if get is not None and "claim" in get(node).lower():
                found.append(f"{name}:{getattr(node, 'lineno', '?')}: {get(node)}")
    assert not found
