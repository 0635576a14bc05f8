"""The expected-outcomes check: every ``required`` outcome of the task (Polpo's ``expectedOutcomes``) was delivered.

Not an expectation type a mission writes: the assessor adds it, as a rejecting tier of its own before the
others, to any task with ``expectedOutcomes``. An outcome counts as delivered when the attempt declared one with
the same label (case and spacing ignored) — an LLM agent through its ``register_outcome`` tool, a command agent
by writing a JSON line to the file ``$POLPO_OUTCOMES`` names — or, for a ``file`` outcome with a ``path``, when
that file exists in the workspace. Cheap: no process, no model call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from polpo.checks.base import CheckOutcome
from polpo.tools.sandbox import Sandbox, SandboxError

__all__ = ["OUTCOMES_TYPE", "check_outcomes", "describe_outcome"]

OUTCOMES_TYPE = "expected_outcomes"


def _key(label: object) -> str:
    return " ".join(str(label or "").lower().split())


def describe_outcome(o: Mapping[str, Any]) -> str:
    """``'Audit Report' (file audit-report.md)`` — how an expected outcome is named to agents and in failures."""
    where = f" {o['path']}" if o.get("path") else ""
    return f"{o.get('label')!r} ({o.get('type')}{where})"


def _exists(sandbox: Sandbox, path: str) -> bool:
    try:
        return Path(sandbox.resolve(path, must_exist=True)).is_file()
    except SandboxError:
        return False


def check_outcomes(expected: Sequence[Mapping[str, Any]], declared: Sequence[Mapping[str, Any]],
                   workspace: Path) -> CheckOutcome:
    """Pass iff every required expected outcome was declared (by label) or, for a file, exists at its path."""
    required = [o for o in expected if o.get("required", True)]
    labels = {_key(o.get("label")) for o in declared}
    sandbox = Sandbox(workspace)
    missing = [o for o in required if _key(o.get("label")) not in labels
               and not (o.get("type") == "file" and o.get("path") and _exists(sandbox, str(o["path"])))]
    shown = ", ".join(f"{o.get('label')!r}" for o in declared) or "none"
    details = f"declared by the attempt: {shown}"
    if not missing:
        return CheckOutcome(OUTCOMES_TYPE, "expected outcomes", True,
                            f"All {len(required)} required outcome(s) delivered", details)
    names = "; ".join(describe_outcome(o) for o in missing)
    return CheckOutcome(OUTCOMES_TYPE, "expected outcomes", False,
                        f"Missing {len(missing)}/{len(required)} required outcome(s): {names}",
                        details + "\nDeclare each deliverable (register_outcome, or a JSON line in $POLPO_OUTCOMES)"
                        " or, for a file, create it at its path.")
