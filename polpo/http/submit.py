"""``POST /api/missions``: a mission document in, a running mission's id out (or every problem, with its path).

The document is checked as ``polpo validate`` checks a file (agents, notification rules, the [security]
policy); a bad one answers 422 with ``errors: [{path, message}]`` and writes nothing. A good one is written
into the missions folder under a new name (never over an existing file), temp file + rename as ``polpo
submit`` does, and goes through the daemon's one intake like any dropped file; the answer waits for the
intake's verdict: 201 with the mission id, or 422 with the intake's problems (the file is then removed: the
API wrote it and the caller has the reasons).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response

from polpo.config import Config
from polpo.engine.admission import slugify
from polpo.events import catalog as E
from polpo.http.body import BodyRefused, read_body
from polpo.http.context import ApiContext, json_response
from polpo.http.problem import problem_response
from polpo.intake.scoped import scoped_problems
from polpo.intake.watcher import is_mission_file
from polpo.mission.loader import load_mission
from polpo.mission.security import policy_problems

__all__ = ["submit_mission"]

INTAKE_WAIT = 30.0  # seconds; the watcher settles a file in well under one


async def submit_mission(ctx: ApiContext, request: Request) -> Response:
    try:
        raw = await read_body(request, *body_limit(ctx.cfg))  # never buffered past the limit
    except BodyRefused as e:
        return e.response()
    result = load_mission(raw, known_agents=ctx.known_agents)
    target = _target(ctx.cfg.missions_dir, request.query_params.get("name"), result.spec.name if result.spec else None)
    if target is None:
        return _problems([{"path": "$", "message": "?name= must end in .json, not start with a dot, and have no /"}])
    problems = result.problems
    if result.spec is not None:
        problems = scoped_problems(result.spec, ctx.channels) + policy_problems(result.spec, ctx.cfg, target)
    if problems:
        return _problems([{"path": p.path, "message": p.message} for p in problems])
    source = str(target)

    def verdict(ev: E.Event) -> bool:
        return (ev.event in ("mission:accepted", "mission:rejected", "schedule:created")
                and ev.data.get("file") == source)

    listener = ctx.hub.listen(verdict, capacity=100)  # before the file exists
    try:
        await anyio.to_thread.run_sync(_write, target, raw)
        if ctx.offer is not None:  # taken in now, without the folder's latency
            await ctx.offer(target, raw)
        ev = await listener.first(INTAKE_WAIT)
    finally:
        listener.close()
    if ev is None:
        return json_response({"status": "pending", "file": source,
                              "message": "written; the daemon has not taken it in yet"}, 202)
    if ev.event == "mission:rejected":
        await anyio.to_thread.run_sync(lambda: target.unlink(missing_ok=True))
        errors: list[dict[str, Any]] = ev.data.get("errors") or []
        return _problems(errors)
    if ev.event == "schedule:created":  # a scheduled mission: nothing runs until its first firing
        return json_response({"scheduleId": ev.mission_id, "file": source, "nextRunAt": ev.data.get("nextRunAt")},
                             201)
    return json_response({"missionId": ev.mission_id, "file": source, "warnings": ev.data.get("warnings") or []}, 201)


def body_limit(cfg: Config) -> tuple[int, str]:
    """The larger a mission body may be: ``[http] max_body``, or the intake's own limit when that is smaller (a
    body the intake would refuse unread is refused here, before it is written into the missions folder)."""
    return min((cfg.http.max_body, "[http] max_body"), (cfg.daemon.max_mission_bytes, "[daemon] max_mission_bytes"))


def _problems(errors: list[dict[str, Any]]) -> Response:
    detail = "; ".join(f"{e.get('path', '$')}: {e.get('message', '')}" for e in errors[:3])
    return problem_response(422, "invalid mission", detail + (f"; and {len(errors) - 3} more" if len(errors) > 3 else ""),
                            errors=errors)


def _target(folder: Path, name: str | None, mission_name: str | None) -> Path | None:
    """A path in the missions folder that no file has yet: ``NAME.json``, ``NAME-2.json`` …"""
    if name is not None:
        if "/" in name or not is_mission_file(Path(name)):
            return None
        stem = name[: -len(".json")]
    else:
        stem = slugify(mission_name or "mission")
    folder = folder.resolve()
    candidate = folder / f"{stem}.json"
    n = 2
    while candidate.exists():
        candidate = folder / f"{stem}-{n}.json"
        n += 1
    return candidate


def _write(target: Path, raw: bytes) -> None:
    """Temp file + fsync + rename: the watcher sees the whole file once (it ignores dot-files)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(raw)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
