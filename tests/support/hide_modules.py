"""Run a real ``python -m polpo`` as if some packages were not installed.

A venv without an extra takes ~40 s to build; Python's view of a package that is not installed is an import
system that cannot find it, which is what this gives the subprocess: a ``sitecustomize`` on ``PYTHONPATH`` puts a
finder first on ``sys.meta_path`` that answers ``ModuleNotFoundError`` for the named top-level packages. polpo's
own modules run unchanged.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["hidden_env"]

SITECUSTOMIZE = '''
import os, sys

HIDDEN = set(filter(None, os.environ.get("POLPO_TEST_HIDDEN_MODULES", "").split(",")))


class _Hide:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _Hide())
'''


def hidden_env(folder: Path, *modules: str) -> dict[str, str]:
    """Environment variables that make a child Python see ``modules`` as not installed."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return {"PYTHONPATH": str(folder), "POLPO_TEST_HIDDEN_MODULES": ",".join(modules)}
