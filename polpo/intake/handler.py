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
from dataclasses import replace
from pathlib import Path

import anyio

from polpo.engine.admission import Admission, slugify
from polpo.engine.faults import FaultNotes
from polpo.engine.schedules import Scheduler
from polpo.fsfaults import Pause, StoreAway, passing
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

    async def __call__(self, path: Path, content: bytes | Unreadable, stamp: str | None = None) -> str:
        """Returns what happened: accepted | scheduled | rejected | busy | duplicate | lost (this node can no longer
        write: fenced, or its database is gone; the daemon stops and says why, and the file is left for the next
        leader or start, never rejected for it). ``stamp``: the file as it was read, once trusted
        (polpo.intake.stamps), kept with what became of its bytes."""
        source = os.path.abspath(path)  # noqa: ASYNC240 - string work; watcher paths are absolute
        digest = content.digest if isinstance(content, Unreadable) else hashlib.sha256(content).hexdigest()
        known: SourceRecord | None = None
        try:
            known = await self.admission.source(carryable(source))
            return await self._handle(source, content, digest, known, stamp)
        except StoreLost:
            return "lost"
        except Exception as exc:
            if passing(exc) is not None:  # not the file's fault, and it passes: the watcher tries the file again
                raise
            if self.admission.store.away(exc):  # the database away (nemesis seed 1016 rejected a file for it)
                raise StoreAway(exc) from exc
            log.exception("internal error while handling %s", carryable(source))
            self._reject(carryable(source), digest, internal_error(exc), known=known, stamp=stamp)
            return "rejected"

    async def unchanged(self, stamps: dict[Path, str]) -> set[Path]:
        """Of these files (with their stamps now), those whose stored record says their bytes were handled and
        which are still as they were read: the start-up scan does not read them again (a file edited while its
        mission ran is read again: its new bytes may start a run now)."""
        by_source = {source: p for p in stamps  # (a name that is not UTF-8 is read: it is refused by name)
                     if carryable(source := os.path.abspath(p)) == source}  # noqa: ASYNC240 - string work
        try:
            records = await self.admission.store.sources_at(list(by_source))
        except Exception as exc:
            if self.admission.store.away(exc):  # the scan waits the database out (nemesis seed 9517)
                raise StoreAway(exc) from exc
            raise
        return {by_source[r.path] for r in records
                if r.stamp and r.hash and r.stamp == stamps[by_source[r.path]] and r.outcome is not SourceOutcome.BUSY}

    async def _handle(self, source: str, content: bytes | Unreadable, digest: str, info: SourceRecord | None,
                      stamp: str | None) -> str:
        adm = self.admission
        if carryable(source) != source:
            # the name would break the store (and every command line it reaches): refuse the file, keyed safely
            source = carryable(source)
            if _same(info, digest):
                return "duplicate"
            self._reject(source, digest, Verdict(None, [Problem("$", "the file name is not valid UTF-8; rename "
                                                                     "the file")], [], "invalid"), known=info)
            return "rejected"
        active = adm.active_for_source(source)
        if info is not None and info.hash == digest and (info.outcome is not SourceOutcome.BUSY or active):
            if stamp is not None and stamp != info.stamp:  # stamped now: the next start need not read it
                adm.record(replace(info, stamp=stamp))
            return "duplicate"
        if isinstance(content, Unreadable):
            self._reject(source, digest, unreadable(content), known=info, stamp=stamp)
            return "rejected"
        scheduled = self.schedules is not None and self.schedules.of_source(source) is not None
        if active is not None and not scheduled:  # a scheduled file's edit changes its schedule, even mid-run
            if active.hash == digest:  # edited back to what is running
                adm.record(SourceRecord(source, digest, SourceOutcome.ACCEPTED, active.id,
                                        info.runs if info is not None else active.run, stamp))
                return "duplicate"
            reason = (f"mission {active.id!r} from this file is still running, so the edit is not applied "
                      f"(the running mission keeps its original tasks). Cancel it with `polpo cancel {active.id}` "
                      "or wait for it to finish, then save the file again to start a new run")
            self._reject(source, digest, Verdict(None, [Problem("$", reason)], [], "still running"),
                         busy_with=active.id, known=info, stamp=stamp)
            return "busy"
        # in a worker thread: a big bad file costs seconds of validation, which must not stall running missions
        verdict = await anyio.to_thread.run_sync(lambda: check_mission(
            content, known_agents=self.known_agents, channels=self.channels, judge=bool(adm.cfg.judge.panel_models()),
            policy=lambda spec: policy_problems(spec, adm.cfg, source)))
        if verdict.spec is None:
            self._reject(source, digest, verdict, known=info, stamp=stamp)
            return "rejected"
        if self.schedules is not None and (scheduled or verdict.spec.schedule is not None):
            return await self.schedules.from_file(source, digest, verdict.spec, list(verdict.warnings), stamp)
        await adm.accept(spec=verdict.spec, source=source, digest=digest, warnings=list(verdict.warnings),
                         stamp=stamp)
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

    def _reject(self, source: str, digest: str, verdict: Verdict, *, busy_with: str | None = None,
                known: SourceRecord | None, stamp: str | None = None) -> None:
        shown, more = cap(verdict.problems)
        self.admission.reject(source, digest, reason=verdict.reason or "invalid",
                              errors=[{"path": p.path, "message": p.message} for p in shown],
                              lines=format_problems(source, shown), more=more or None, busy_with=busy_with,
                              known=known, stamp=stamp)


def _mission_of(path: Path) -> str:
    return slugify(carryable(path.stem))


def _same(info: SourceRecord | None, digest: str) -> bool:
    return info is not None and info.hash == digest
