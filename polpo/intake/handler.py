"""What a mission file's bytes mean: start a run, reject it, or nothing (already handled).

Rules (docs/how-to/missions.md, "How the daemon treats files"):
- the same bytes again (an editor's extra events, a re-save, a restart) start nothing;
- new bytes while the mission from this file is still running are rejected with a reason: the running
  mission keeps its original spec. Cancel it (``polpo cancel ID``) or wait for it to finish, then save again;
- new bytes after it finished start a new run, with id ``NAME#2``, ``NAME#3`` …;
- invalid bytes are rejected with every problem (the first :data:`~polpo.intake.check.MAX_REPORTED` listed,
  the rest counted); the file is never moved, changed or deleted;
- a file that is not read (not a regular file, too large, unreadable) is rejected with why;
- whatever goes wrong inside polpo while handling a file rejects that file (``internal error``, traceback in
  the log), so it is stored like any rejection and not retried at every restart;
- except a fault of the environment that passes by itself (:mod:`polpo.fsfaults`: the state folder or the
  workspace read-only or full, no file descriptors…): nothing is stored, the exception goes back to the watcher,
  which says so (``fault:paused``, :meth:`IntakeHandler.paused`) and tries the file again with a backoff.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Collection
from pathlib import Path

import anyio

from polpo.engine.admission import Admission, slugify
from polpo.engine.faults import FaultNotes
from polpo.engine.schedules import Scheduler
from polpo.fsfaults import Pause, passing
from polpo.intake.check import Verdict, cap, check_mission, internal_error, unreadable
from polpo.intake.reader import Unreadable
from polpo.mission.jsonbytes import carryable
from polpo.mission.loader import Problem, format_problems
from polpo.mission.security import policy_problems
from polpo.model.status import SourceOutcome
from polpo.store.identity import StoreLost
from polpo.store.protocol import SourceRecord

__all__ = ["IntakeHandler"]

log = logging.getLogger("polpo.intake")


class IntakeHandler:
    def __init__(self, admission: Admission, *, known_agents: list[str], channels: Collection[str] | None,
                 schedules: Scheduler | None = None) -> None:
        self.admission = admission
        self.schedules = schedules  # a file with a schedule makes one (polpo.engine.schedules)
        self.known_agents = known_agents
        self.channels = channels  # notification channels, for checking gates' notifyChannels
        self.faults = FaultNotes(admission.store, admission.clock)

    async def __call__(self, path: Path, content: bytes | Unreadable) -> str:
        """Returns what happened: accepted | scheduled | rejected | busy | duplicate | lost (this node can no longer
        write: fenced, or its database is gone; the daemon stops and says why, and the file is left for the next
        leader or start, never rejected for it)."""
        source = os.path.abspath(path)  # noqa: ASYNC240 - string work; watcher paths are absolute
        digest = content.digest if isinstance(content, Unreadable) else hashlib.sha256(content).hexdigest()
        try:
            return await self._handle(source, content, digest)
        except StoreLost:
            return "lost"
        except Exception as exc:
            if passing(exc) is not None:  # not the file's fault, and it passes: the watcher tries the file again
                raise
            log.exception("internal error while handling %s", carryable(source))
            self._reject(carryable(source), digest, internal_error(exc))
            return "rejected"

    async def _handle(self, source: str, content: bytes | Unreadable, digest: str) -> str:
        adm = self.admission
        if carryable(source) != source:
            # the name would break the store (and every command line it reaches): refuse the file, keyed safely
            source = carryable(source)
            if _same(adm.sources.get(source), digest):
                return "duplicate"
            self._reject(source, digest, Verdict(None, [Problem("$", "the file name is not valid UTF-8; rename "
                                                                     "the file")], [], "invalid"))
            return "rejected"
        info = adm.sources.get(source)
        active = adm.active_for_source(source)
        if info is not None and info.hash == digest and (info.outcome is not SourceOutcome.BUSY or active):
            return "duplicate"
        if isinstance(content, Unreadable):
            self._reject(source, digest, unreadable(content))
            return "rejected"
        scheduled = self.schedules is not None and self.schedules.of_source(source) is not None
        if active is not None and not scheduled:  # a scheduled file's edit changes its schedule, even mid-run
            if active.hash == digest:  # edited back to what is running
                adm.record(source, digest, SourceOutcome.ACCEPTED, active.id)
                return "duplicate"
            reason = (f"mission {active.id!r} from this file is still running, so the edit is not applied "
                      f"(the running mission keeps its original tasks). Cancel it with `polpo cancel {active.id}` "
                      "or wait for it to finish, then save the file again to start a new run")
            self._reject(source, digest, Verdict(None, [Problem("$", reason)], [], "still running"),
                         busy_with=active.id)
            return "busy"
        # in a worker thread: a big bad file costs seconds of validation, which must not stall running missions
        verdict = await anyio.to_thread.run_sync(lambda: check_mission(
            content, known_agents=self.known_agents, channels=self.channels, judge=bool(adm.cfg.judge.panel_models()),
            policy=lambda spec: policy_problems(spec, adm.cfg, source)))
        if verdict.spec is None:
            self._reject(source, digest, verdict)
            return "rejected"
        if self.schedules is not None and (scheduled or verdict.spec.schedule is not None):
            return await self.schedules.from_file(source, digest, verdict.spec, list(verdict.warnings))
        await adm.accept(spec=verdict.spec, source=source, digest=digest, warnings=list(verdict.warnings))
        return "accepted"

    # -- passing faults: the watcher waits them out, these say so -----------------------------------------
    def pause(self) -> Pause:
        return self.faults.pause()

    def paused(self, path: Path, code: int, exc: BaseException, delay: float) -> None:
        self.faults.paused("intake", carryable(str(path)), code, exc, delay, mission_id=_mission_of(path))

    def still(self, path: Path, pause: Pause) -> None:
        self.faults.still("intake", carryable(str(path)), pause)

    def resumed(self, path: Path, pause: Pause) -> None:
        self.faults.resumed("intake", carryable(str(path)), pause, mission_id=_mission_of(path))

    def _reject(self, source: str, digest: str, verdict: Verdict, *, busy_with: str | None = None) -> None:
        shown, more = cap(verdict.problems)
        self.admission.reject(source, digest, reason=verdict.reason or "invalid",
                              errors=[{"path": p.path, "message": p.message} for p in shown],
                              lines=format_problems(source, shown), more=more or None, busy_with=busy_with)


def _mission_of(path: Path) -> str:
    return slugify(carryable(path.stem))


def _same(info: SourceRecord | None, digest: str) -> bool:
    return info is not None and info.hash == digest
