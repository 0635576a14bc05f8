"""Token log-probabilities of a reply, as providers return them (OpenAI's ``logprobs.content`` shape, which
vLLM and llama.cpp's server share): each generated token with its log-probability and the most likely
alternatives at its position. The review panel reads the score tokens' distributions from them (G-Eval)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["TOP_LOGPROBS", "TokenLogprob", "from_response", "refuses_logprobs"]

TOP_LOGPROBS = 10
"""Alternatives asked for per position: enough to see every score digit 1..5 and the tokens that compete."""


@dataclass(frozen=True)
class TokenLogprob:
    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()
    """(token, log-probability) of the most likely tokens at this position, the generated one among them."""

    def to_json(self) -> dict[str, Any]:
        return {"token": self.token, "logprob": self.logprob, "top": [list(t) for t in self.top]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TokenLogprob:
        return cls(str(data["token"]), float(data["logprob"]),
                   tuple((str(t), float(lp)) for t, lp in data.get("top") or ()))


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def _number(v: Any) -> float | None:
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def from_response(choice_logprobs: Any) -> list[TokenLogprob] | None:
    """The tokens of a choice's ``logprobs`` (object or mapping), or None when the provider sent none."""
    content = _get(choice_logprobs, "content") if choice_logprobs is not None else None
    if not isinstance(content, Sequence) or isinstance(content, str) or not content:
        return None
    out: list[TokenLogprob] = []
    for entry in content:
        token, logprob = _get(entry, "token"), _number(_get(entry, "logprob"))
        if not isinstance(token, str) or logprob is None:
            return None  # a shape we do not know: no distribution rather than a wrong one
        top: list[tuple[str, float]] = []
        for alt in _get(entry, "top_logprobs") or ():
            t, lp = _get(alt, "token"), _number(_get(alt, "logprob"))
            if isinstance(t, str) and lp is not None:
                top.append((t, lp))
        out.append(TokenLogprob(token, logprob, tuple(top)))
    return out


def refuses_logprobs(message: str) -> bool:
    """Whether a refused request was refused for asking log-probabilities (some servers do not serve them)."""
    low = message.lower()
    return "logprob" in low
