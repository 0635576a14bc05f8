"""A mission file's stamp: what the start-up scan compares instead of reading and hashing the file again.

A stamp is ``inode:size:mtime`` (nanoseconds) of the file, taken just before its bytes were read. The store keeps it
with what became of those bytes (``sources.stamp``), and a start skips a file whose stamp is unchanged, so a folder
of finished files costs a ``stat`` each, not a read and a hash. A stamp is kept only once it can be trusted: the
file's last change at least :data:`SETTLED_NS` before it was read. A file written again within the same tick of
the file system's clock could keep its size and mtime (git's "racy clean" entries), and its new bytes would be
skipped; so a file read right after it was written (the usual case) is stored without a stamp, read once more at
the next start, and stamped then.
"""

from __future__ import annotations

import os

__all__ = ["SETTLED_NS", "settled_stamp", "stamp_of", "trusted"]

SETTLED_NS = 2_000_000_000  # coarser than any file system's mtime tick (FAT's is 2 s; ext4's a few ms)


def stamp_of(st: os.stat_result) -> str:
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def trusted(st: os.stat_result, read_at_ns: int) -> str | None:
    """The stamp of a file read at ``read_at_ns`` (``time.time_ns()``) with this ``stat``, or None while a change
    in the same clock tick could still go unseen (or the file's time is in the future)."""
    age = read_at_ns - st.st_mtime_ns
    return stamp_of(st) if age >= SETTLED_NS else None


def settled_stamp(stamp: str, at_ns: int) -> bool:
    """Whether a stamp taken at ``at_ns`` can be trusted, as :func:`trusted` decides from the ``stat``: its
    mtime at least :data:`SETTLED_NS` earlier."""
    return bool(stamp) and at_ns - int(stamp.rsplit(":", 1)[1]) >= SETTLED_NS
