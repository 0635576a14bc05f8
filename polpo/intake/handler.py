"""What a mission file's bytes mean: start a run, reject it, or nothing (already handled).

Rules (README "How the daemon treats files"):
- the same bytes again (an editor's extra events, a re-save, a restart) start nothing;
- new bytes while the mission from this file is still running are rejected with a reason: the running
  mission keeps its original spec. Cancel it (``polpo cancel ID``) or wait for it to finish, then save again;
- new bytes after it finished start a new run, with id ``NAME#2``, ``NAME#3`` …;
- invalid bytes are rejected with every problem; the file is never moved, changed or deleted.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection
from pathlib import Path

from polpo.engine.admission import Admission
from polpo.intake.scoped import scoped_problems
from polpo.mission.loader import Problem, format_problems, load_mission
from polpo.mission.schema import MissionSpec
from polpo.mission.security import policy_problems
from polpo.model.status import SourceOutcome

__all__ = ["IntakeHandler"]


class IntakeHandler:
    def __init__(self, admission: Admission, *, known_agents: list[str], channels: Collection[str] | None) -> None:
        self.admission = admission
        self.known_agents = known_agents
        self.channels = channels  # notification channels, for checking gates' notifyChannels

    async def __call__(self, path: Path, raw: bytes) -> str:
        """Returns what happened: accepted | rejected | busy | duplicate."""
        adm = self.admission
        source = os.path.abspath(path)  # noqa: ASYNC240 - string work; watcher paths are absolute
        digest = hashlib.sha256(raw).hexdigest()
        info = adm.sources.get(source)
        active = adm.active_for_source(source)
        if info is not None and info.hash == digest and (info.outcome is not SourceOutcome.BUSY or active):
            return "duplicate"
        if active is not None:
            if active.hash == digest:  # edited back to what is running
                adm.record(source, digest, SourceOutcome.ACCEPTED, active.id)
                return "duplicate"
            reason = (f"mission {active.id!r} from this file is still running, so the edit is not applied "
                      f"(the running mission keeps its original tasks). Cancel it with `polpo cancel {active.id}` "
                      "or wait for it to finish, then save the file again to start a new run")
            self._reject(source, digest, [Problem("$", reason)], "still running", busy_with=active.id)
            return "busy"
        result = load_mission(raw, known_agents=self.known_agents)
        problems = result.problems if result.spec is None else (
            _unknown_channels(result.spec, self.channels) + scoped_problems(result.spec, self.channels)
            + policy_problems(result.spec, adm.cfg, source))
        if result.spec is None or problems:
            self._reject(source, digest, problems, "invalid")
            return "rejected"
        await adm.accept(spec=result.spec, source=source, digest=digest, warnings=list(result.warnings))
        return "accepted"

    def _reject(self, source: str, digest: str, problems: list[Problem], reason: str, *,
                busy_with: str | None = None) -> None:
        self.admission.reject(source, digest, reason=reason,
                              errors=[{"path": p.path, "message": p.message} for p in problems],
                              lines=format_problems(source, problems), busy_with=busy_with)


def _unknown_channels(spec: MissionSpec, known: Collection[str] | None) -> list[Problem]:
    """A gate's notifyChannels must name channels of the config, or its notifications would vanish."""
    if known is None:
        return []
    listing = ", ".join(sorted(known)) or "none are configured"
    return [Problem(f"$.qualityGates[{i}].notifyChannels[{j}]", f'no channel named "{name}"; available: {listing}')
            for i, g in enumerate(spec.quality_gates) for j, name in enumerate(g.notify_channels)
            if name not in known]
