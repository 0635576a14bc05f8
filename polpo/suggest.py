"""'did you mean' for a misspelt key or name, shared by mission documents and the config file."""

from __future__ import annotations

import difflib
from collections.abc import Collection

__all__ = ["MAX_SUGGESTIONS", "Suggester"]

MAX_SUGGESTIONS = 50  # difflib is linear in the candidates: cap it so a broken 10 000-task file stays fast


class Suggester:
    """'; did you mean "x"?' for a misspelt key or name; a budget keeps a badly broken big file linear."""

    def __init__(self) -> None:
        self.budget = MAX_SUGGESTIONS

    def __call__(self, word: str, choices: Collection[str]) -> str:
        if not choices or self.budget <= 0:
            return ""
        self.budget -= 1
        lowered = {c.lower(): c for c in choices}
        match = lowered.get(word.lower()) or lowered.get(word.replace("_", "").lower())
        if match is None:
            close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
            match = close[0] if close else None
        return f'; did you mean "{match}"?' if match else ""
