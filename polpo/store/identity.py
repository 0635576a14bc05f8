"""The store's identity: is the database the one ``events.jsonl`` was written from?

Every store holds a UUID written once, when its tables are made (``meta.store_id``), and ``events.jsonl.pos``
carries it beside the last ``seq`` written. At start a store that does not match (another identity, or fewer
events than the log: deleted and created empty, or restored from an older copy) is refused: its missions-folder
files would be admitted as new and run a second time, and its events would be numbered again under lines the
log already has. Starting with ``--archive-log`` is the explicit way to go on with the store as it is: the old
log is moved aside and a new one begins. :func:`decide` is the pure rule; :func:`verify` applies it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from polpo.events.log import EventLog
from polpo.store.errors import StoreError

log = logging.getLogger("polpo.store")

__all__ = ["Adopt", "Match", "Refuse", "StoreLost", "StoreMismatch", "decide", "lost_advice", "lost_message", "refusal",
           "verify"]

ARCHIVE_OPTION = "--archive-log"


class StoreMismatch(StoreError):
    """At start: the store is not the one the event log was written from (the daemon does not start)."""


class StoreLost(StoreError):
    """While running: the store's database was deleted or replaced (the writer stopped; the daemon stops)."""


@dataclass(frozen=True)
class Match:
    """The log was written from this store."""


@dataclass(frozen=True)
class Adopt:
    """No identity recorded yet (a first start, or a position file from before identities): record this one."""


@dataclass(frozen=True)
class Refuse:
    why: str  # what does not match, for the message


Verdict = Match | Adopt | Refuse


def decide(store_id: str, store_seq: int, log_id: str | None, log_seq: int) -> Verdict:
    """Whether a store (its identity, its newest event) may go on writing a log (the identity and the newest
    event its position file and lines record; ``log_id`` None: none recorded)."""
    held = "no events" if store_seq == 0 else f"events up to {store_seq}"
    if log_id is not None and log_id != store_id:
        return Refuse(f"this store is {store_id} and holds {held}; the log was written from store {log_id} "
                      f"and has events up to {log_seq}")
    if store_seq < log_seq:
        return Refuse(f"this store holds {held}; the log has events up to {log_seq}")
    return Match() if log_id is not None else Adopt()


def refusal(where: str, events: Path, why: str) -> str:
    return (f"the store {where} is not the one {events} was written from ({why}): it was deleted, replaced or "
            "restored from an older copy. Restore the database it was (polpo saves a copy beside an SQLite file "
            f"deleted under it: <name>.rescued-<time>), or start afresh with `polpo daemon {ARCHIVE_OPTION}`, which "
            f"moves {events.name} to {events.name}.<time>, begins a new log with this store and admits every file "
            "in the missions folder that this store has not seen: those missions run again")


def lost_message(where: str, what: str) -> str:
    """While running: the database went away (``what``: "was deleted", "was replaced by another file")."""
    return f"the store {where} {what} while the daemon ran: polpo stopped writing to it and stops its agents"


def lost_advice(rescued: Path | None, where: str) -> str:
    """What to do after :func:`lost_message`; ``rescued``: the copy of what the database held, if one was made."""
    fresh = (f"or start afresh with `polpo daemon {ARCHIVE_OPTION}` (every file in the missions folder is then "
             "admitted again and its missions run again)")
    if rescued is None:
        return f"restore {where} from a copy and start polpo again, {fresh}"
    return (f"it saved what the database held as {rescued}: move that file to {where} and start polpo again, "
            f"it goes on where it was; {fresh}")


def verify(store_id: str, store_seq: int, where: str, event_log: EventLog, *, archive_log: bool = False) -> None:
    """Refuse a store the log was not written from (StoreMismatch), unless ``archive_log``: then move the old
    log aside and begin a new one. Records the store's identity in the position file when none is."""
    verdict = decide(store_id, store_seq, event_log.store_id, event_log.last_seq)
    if isinstance(verdict, Refuse):
        if not archive_log:
            raise StoreMismatch(refusal(where, event_log.path, verdict.why))
        moved = event_log.archive(datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ"))
        log.warning("%s: the old event log is now %s and a new one begins (%s)", ARCHIVE_OPTION, moved, verdict.why)
        verdict = Adopt()
    elif archive_log:
        log.warning("%s: nothing to archive, the store %s is the one %s was written from; leave the option out "
                    "of service files, so that a store deleted later is refused", ARCHIVE_OPTION, where,
                    event_log.path.name)
    if isinstance(verdict, Adopt):
        event_log.adopt(store_id)
