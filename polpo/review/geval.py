"""G-Eval's score: the probability-weighted mean over the score tokens, not the one token sampled. Pure.

Liu et al. (G-Eval, 2023) take each score as ``Σ p(s)·s`` over the scale's tokens, because the sampled token
throws away how sure the model was: a model that puts 0.45 on "4" and 0.40 on "2" has not said "4". Where the
provider returns log-probabilities (OpenAI, vLLM, llama.cpp's server), the reply's tokens are laid end to end,
each ``"score": N`` the model wrote is found in that text, and the alternatives at N's token give the
distribution over 1..5. A yes/no answer (a checklist question) is read the same way as ``P(yes)``.

Nothing is guessed: a score whose token cannot be found, whose position offers no digit 1..5, or whose digit is
not the one the parsed answer holds keeps its sampled value, and says so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from polpo.llm.logprobs import TokenLogprob

__all__ = ["Distribution", "answer_distributions", "score_distributions"]

LEVELS = (1, 2, 3, 4, 5)
_SCORE = re.compile(r'"score"\s*:\s*"?\s*([1-5])(?![0-9])')
_ANSWER = re.compile(r'"answer"\s*:\s*"\s*(yes|no|Yes|No|YES|NO)')


@dataclass(frozen=True)
class Distribution:
    """The probability of each level (normalised over the levels), and how much of the position's whole
    probability the levels held (``mass``, of 1: near 1 when the model only considered valid scores)."""

    probs: dict[int, float]
    mass: float

    @property
    def mean(self) -> float:
        return round(math.fsum(k * p for k, p in self.probs.items()), 4)

    @property
    def std(self) -> float:
        mean = math.fsum(k * p for k, p in self.probs.items())
        return round(math.sqrt(math.fsum(p * (k - mean) ** 2 for k, p in self.probs.items())), 4)

    def to_json(self) -> dict[str, object]:
        return {"probs": {str(k): round(p, 4) for k, p in sorted(self.probs.items())}, "mass": round(self.mass, 4)}


def _positions(tokens: Sequence[TokenLogprob]) -> tuple[str, list[int]]:
    """The reply's text and the offset at which each token starts."""
    starts, text = [], []
    at = 0
    for t in tokens:
        starts.append(at)
        text.append(t.token)
        at += len(t.token)
    return "".join(text), starts


def _token_at(starts: list[int], offset: int) -> int:
    lo, hi = 0, len(starts) - 1
    while lo < hi:  # the last token starting at or before offset
        mid = (lo + hi + 1) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _levels_at(token: TokenLogprob, values: dict[str, int]) -> Distribution | None:
    """The distribution over ``values`` (token text, spaces and quotes aside → level) at one position, from its
    alternatives (``" 4"`` and ``"4"`` are both 4 there)."""
    if not token.top:
        return None  # no alternatives came back: there is nothing to weigh the sampled token against
    found: dict[int, float] = {}
    alternatives = dict(token.top)
    alternatives.setdefault(token.token, token.logprob)  # the token written is one of the outcomes, listed or not
    for alt, logprob in alternatives.items():
        key = alt.strip().strip('"')
        if key in values:
            found[values[key]] = found.get(values[key], 0.0) + math.exp(logprob)
    mass = sum(found.values())
    if mass <= 0:
        return None
    return Distribution({k: v / mass for k, v in found.items()}, min(1.0, mass))


def score_distributions(tokens: Sequence[TokenLogprob] | None, sampled: Sequence[float]) -> list[Distribution | None]:
    """For each score the reply gave (in the order written, ``sampled`` their parsed values), its distribution
    over 1..5, or None where it cannot be read (then the sampled value stands)."""
    out: list[Distribution | None] = [None] * len(sampled)
    if not tokens:
        return out
    text, starts = _positions(tokens)
    matches = list(_SCORE.finditer(text))
    if len(matches) != len(sampled):
        return out  # the parsed answer and the text disagree on how many scores there are: read none
    values = {str(k): k for k in LEVELS}
    for i, (m, value) in enumerate(zip(matches, sampled, strict=True)):
        if float(m.group(1)) != value:
            continue
        idx = _token_at(starts, m.start(1))
        token = tokens[idx]
        if token.token.strip().strip('"') != m.group(1):
            continue  # the digit shares its token with other text: its alternatives are not scores
        out[i] = _levels_at(token, values)
    return out


def answer_distributions(tokens: Sequence[TokenLogprob] | None, sampled: Sequence[bool]) -> list[float | None]:
    """For each yes/no ``"answer"`` written (in the order written: the caller maps them to its questions),
    ``P(yes)`` from its token's alternatives, or None."""
    out: list[float | None] = [None] * len(sampled)
    if not tokens:
        return out
    text, starts = _positions(tokens)
    matches = list(_ANSWER.finditer(text))
    if len(matches) != len(sampled):
        return out
    values = {"yes": 1, "Yes": 1, "YES": 1, "no": 0, "No": 0, "NO": 0}
    for i, (m, value) in enumerate(zip(matches, sampled, strict=True)):
        if (m.group(1).lower() == "yes") != value:
            continue
        idx = _token_at(starts, m.start(1))
        token = tokens[idx]
        if token.token.strip().strip('"') not in values:
            continue
        dist = _levels_at(token, values)
        if dist is not None:
            out[i] = round(dist.probs.get(1, 0.0), 4)
    return out
