"""What a mission file's bytes mean: start a run, reject it, or nothing (already handled).

Rules (README "Editing a mission file"):
- the same bytes again (an editor's extra events, a re-save, a restart) start nothing;
- new bytes while the mission from this file is still running are rejected with a reason: the running
  mission keeps its original spec. Cancel it (``polpo cancel ID``) or wait for it to finish, then save again;
- new bytes after it finished start a new run, with id ``NAME#2``, ``NAME#3`` …;
- invalid bytes are rejected with every problem; the file is never moved, changed or deleted.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from polpo.clock import iso
from polpo.engine.engine import Engine, SourceInfo, slugify
from polpo.events import catalog as E
from polpo.mission.loader import Problem, format_problems, load_mission
from polpo.mission.schema import MissionSpec


async def handle_bytes(engine: Engine, path: Path, raw: bytes) -> str:
    """Returns what happened: accepted | rejected | busy | duplicate."""
    source = os.path.abspath(path)  # noqa: ASYNC240 - string work; watcher paths are absolute
    digest = hashlib.sha256(raw).hexdigest()
    info = engine.sources.get(source)
    active = engine.active_for_source(source)
    if info is not None and info.hash == digest and (info.outcome != "busy" or active is not None):
        return "duplicate"
    if active is not None:
        if active.hash == digest:  # edited back to what is running
            _record(engine, source, digest, "accepted", active.id)
            return "duplicate"
        reason = (f"mission {active.id!r} from this file is still running, so the edit is not applied "
                  f"(the running mission keeps its original tasks). Cancel it with `polpo cancel {active.id}` "
                  "or wait for it to finish, then save the file again to start a new run")
        _reject(engine, source, digest, [Problem("$", reason)], busy=True, mission_id=active.id)
        return "busy"
    result = load_mission(raw, known_agents=engine.agents.known_names())
    problems = result.problems if result.spec is None else _unknown_channels(result.spec, engine.channel_names)
    if result.spec is None or problems:
        _reject(engine, source, digest, problems)
        return "rejected"
    await engine.accept(spec=result.spec, source=source, digest=digest, warnings=list(result.warnings),
                        spec_json=raw.decode("utf-8"))
    return "accepted"


def _unknown_channels(spec: MissionSpec, known: set[str] | None) -> list[Problem]:
    """A gate's notifyChannels must name channels of the config, or its notifications would vanish."""
    if known is None:
        return []
    listing = ", ".join(sorted(known)) or "none are configured"
    return [Problem(f"$.qualityGates[{i}].notifyChannels[{j}]", f'no channel named "{name}"; available: {listing}')
            for i, g in enumerate(spec.quality_gates) for j, name in enumerate(g.notify_channels)
            if name not in known]


def _record(engine: Engine, source: str, digest: str, outcome: str, mission_id: str | None) -> None:
    engine.sources[source] = SourceInfo(digest, outcome, mission_id)
    engine.store.submit(engine.store.tx().source((source, digest, outcome, mission_id,
                                                   iso(engine.clock.now()))))


def _reject(engine: Engine, source: str, digest: str, problems: list[Problem], *, busy: bool = False,
            mission_id: str | None = None) -> None:
    outcome = "busy" if busy else "rejected"
    engine.sources[source] = SourceInfo(digest, outcome, mission_id)
    tx = engine.store.tx().source((source, digest, outcome, mission_id, iso(engine.clock.now())))
    errors: list[dict[str, Any]] = [{"path": p.path, "message": p.message} for p in problems]
    tx.event(E.MISSION_REJECTED, mission_id=mission_id or slugify(Path(source).stem), file=source, hash=digest,
             reason="still running" if busy else "invalid", errors=errors,
             lines=format_problems(source, problems))
    engine.store.submit(tx)
