"""Hints the CLI prints name polpo as the user can run it: after the quick start nothing is on the PATH, so a
hint saying bare `polpo` failed with 'command not found'."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from polpo.cli.common import polpo_command


def test_a_polpo_not_on_the_path_is_named_by_the_path_that_ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               ) -> None:
    script = tmp_path / ".venv" / "bin" / "polpo"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(script), "daemon"])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert polpo_command() == os.path.join(".venv", "bin", "polpo")
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")  # an activated venv
    assert polpo_command() == "polpo"
    monkeypatch.setattr(sys, "argv", ["-m", "daemon"])  # python -m polpo
    assert polpo_command() == "polpo"
