"""Does a score cite evidence? Pure.

A score is worth what it rests on. One that names an evidence item (``E2``), a place in the work
(``solution.py:14``, a file the work holds), or quotes what the work printed can be checked by a person; one
that only restates the rubric cannot. A reviewer is asked once for the evidence of its uncited scores; a review
that still cites none counts for less in the consensus (:mod:`polpo.review.consensus`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

__all__ = ["cites"]

_EVIDENCE_ID = re.compile(r"\bE(\d{1,3})\b")
_LINE = re.compile(r"\blines? \d+\b")
_QUOTED = re.compile(r"`([^`]{6,200})`|\"([^\"]{6,200})\"")
MIN_NAME = 3
"""A file name shorter than this (``a``, ``x.c`` aside) cites nothing by itself: it appears in any sentence."""


def _names(files: Sequence[str]) -> set[str]:
    out = set()
    for f in files:
        for name in (f, f.rsplit("/", 1)[-1]):
            if len(name) >= MIN_NAME or "." in name:
                out.add(name)
    return out


def cites(text: str, *, evidence_ids: Collection[str], files: Sequence[str], output: str = "") -> bool:
    """Whether ``text`` (a score's reasoning and evidence notes) cites an evidence item that exists, a file of the
    work by its name or path as a whole word (``solution.py:14`` and ``solution.py`` do, ``a`` inside "a loop"
    does not), or quotes ``output`` (the work's text)."""
    if any(f"E{m.group(1)}" in evidence_ids for m in _EVIDENCE_ID.finditer(text)):
        return True
    if len(files) == 1 and _LINE.search(text):  # one file: "line 14" can only be in it
        return True
    for name in _names(files):
        if re.search(rf"(?<![\w./-]){re.escape(name)}(?![\w-])", text):
            return True
    if output:
        for m in _QUOTED.finditer(text):
            quote = (m.group(1) or m.group(2) or "").strip()
            if len(quote) >= 6 and quote in output:
                return True
    return False
