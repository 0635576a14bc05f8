"""The judge-call cache's file: one SQLite table of answers keyed by a request hash (``[judge] cache``).

Separate from the state database on purpose: it is a disposable cache (delete the file to empty it), local to the
daemon whatever ``[store]`` says, and never part of the record. Synchronous; callers run it in a worker thread.
Entries older than the TTL are ignored and deleted when met.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

__all__ = ["JudgeCacheFile"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS judge_cache (
    key      TEXT PRIMARY KEY,   -- sha256 of model, endpoint, messages, tools and parameters
    value    TEXT NOT NULL,      -- the reply as JSON
    created  REAL NOT NULL       -- seconds since the epoch
)
"""


class JudgeCacheFile:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, timeout=5.0)
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(_SCHEMA)

    def get(self, key: str, now: float, ttl: float) -> str | None:
        """The stored answer, or None when there is none or it is older than ``ttl`` seconds (then dropped)."""
        with self._lock:
            row = self._db.execute("SELECT value, created FROM judge_cache WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            if row[1] < now - ttl:
                with self._db:
                    self._db.execute("DELETE FROM judge_cache WHERE key = ?", (key,))
                return None
            return str(row[0])

    def put(self, key: str, value: str, now: float) -> None:
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO judge_cache (key, value, created) VALUES (?, ?, ?)",
                             (key, value, now))

    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
