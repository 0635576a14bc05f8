"""How polpo reaches PostgreSQL: the password from the environment, and errors that never carry it.

Shared by the daemon's store and the CLI's reader. The password is looked up here, handed to asyncpg as a
keyword (never put in a URL), and every message built from a driver error is scrubbed of it, so it reaches
no log, event or error output. No asyncpg import here: the caller has already paid for it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from polpo.config_paths import StoreSettingsLike
from polpo.store.errors import StoreError, StoreUnavailable
from polpo.store.postgres_faults import is_outage

__all__ = ["PgTarget", "target"]


@dataclass(frozen=True)
class PgTarget:
    url: str
    password: str | None  # None: asyncpg's own fallbacks (PGPASSWORD, ~/.pgpass) or no password at all
    where: str  # user@host:port/db, for messages

    def __repr__(self) -> str:  # a stray repr() in a log line must not print the password
        return f"PgTarget({self.where})"

    def scrub(self, text: str) -> str:
        return text.replace(self.password, "***") if self.password else text

    def error(self, doing: str, exc: BaseException) -> StoreError:
        """A StoreError for a failed connection or query, naming the server but never the password; an outage
        (:func:`is_outage`) is :class:`StoreUnavailable`, which readers may try again, and says what to do."""
        detail = " ".join(self.scrub(str(exc)).split()) or type(exc).__name__  # one line: a DETAIL: line joins it
        if is_outage(exc):
            return StoreUnavailable(f"cannot {doing} the PostgreSQL store at {self.where}: {detail}; the server is "
                                    "stopped, restarting or unreachable: start it or check the way to it, then try "
                                    "again (running daemons wait for it)")
        return StoreError(f"cannot {doing} the PostgreSQL store at {self.where}: {detail}")


def target(settings: StoreSettingsLike) -> PgTarget:
    if settings.url is None:
        raise StoreError("no [store] url configured")
    parts = urlsplit(settings.url)
    query = parse_qs(parts.query)
    host = parts.hostname or query.get("host", ["localhost"])[0]
    try:
        port = str(parts.port or query.get("port", [""])[0])
    except ValueError:
        port = ""
    where = f"{parts.username + '@' if parts.username else ''}{host}{':' + port if port else ''}{parts.path or '/'}"
    password = None
    if settings.password_env:
        password = os.environ.get(settings.password_env)
        if password is None:
            raise StoreError(f"[store] password_env names {settings.password_env}, which is not set")
    return PgTarget(settings.url, password, where)
