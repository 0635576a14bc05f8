"""What a model call cost: the operator's ``[prices]`` first, litellm's model price map second, else unknown.

One price for every caller (the agent's turns, reviewers, judges, budgets), computed from the tokens a reply
reports, so the spend a budget counts is the spend ``polpo status`` shows. litellm's own ``response_cost`` is not
used: it cannot see ``[prices]``, and a local model it does not know would otherwise be silently free.

A model with no known price gives ``None`` (never 0): its calls are counted in tokens and shown as ``cost
unknown``; the first such call per model is logged once. Rates are looked up once per model and kept.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["PriceBook", "Rate", "configure", "default_book", "litellm_rate", "price"]

log = logging.getLogger("polpo.llm")


@dataclass(frozen=True)
class Rate:
    """USD per million tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        return (tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok) / 1_000_000


def _model_cost() -> Mapping[str, Any] | None:
    """litellm's price map when litellm is imported (the client imports it before any call), else its bundled
    copy read without importing litellm (~4 s), so a budget check before the first call still knows prices."""
    mod = sys.modules.get("litellm")
    cost = getattr(mod, "model_cost", None) if mod is not None else None
    if isinstance(cost, Mapping):
        return cost
    return _bundled()


@functools.lru_cache(maxsize=1)
def _bundled() -> Mapping[str, Any] | None:
    try:
        import importlib.util
        import json
        from pathlib import Path

        spec = importlib.util.find_spec("litellm")  # finds the package without importing it
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        data = json.loads((Path(folders[0]) / "model_prices_and_context_window_backup.json").read_bytes())
        return data if isinstance(data, dict) else None
    except Exception:  # litellm missing or moved its file: every model's price is unknown, never free
        return None


def litellm_rate(model: str) -> Rate | None:
    """The rate litellm's map gives ``model`` (``provider/name`` or ``name``), None when it has none."""
    table = _model_cost()
    if table is None:
        return None
    candidates = [model]
    provider, _, name = model.partition("/")
    if name:
        candidates.append(name)
    for key in candidates:
        entry = table.get(key)
        if not isinstance(entry, Mapping):
            continue
        owner = entry.get("litellm_provider")
        if key == name and isinstance(owner, str) and not _same_provider(provider, owner):
            continue  # "ollama/gpt-4o" is not OpenAI's gpt-4o
        cin, cout = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
        if isinstance(cin, int | float) and isinstance(cout, int | float):
            return Rate(float(cin) * 1_000_000, float(cout) * 1_000_000)
    return None


def _same_provider(prefix: str, owner: str) -> bool:
    return owner == prefix or owner.startswith(prefix + "_") or prefix.startswith(owner)


class PriceBook:
    """``[prices]`` overrides over a lookup (litellm's map); each model's rate is resolved once."""

    def __init__(self, overrides: Mapping[str, Rate] | None = None,
                 lookup: Callable[[str], Rate | None] = litellm_rate) -> None:
        self.overrides = dict(overrides or {})
        self._lookup = lookup
        self._rates: dict[str, Rate | None] = {}
        self.unknown: set[str] = set()
        """Models with no known price seen so far (each logged once)."""

    def rate(self, model: str) -> Rate | None:
        try:
            return self._rates[model]
        except KeyError:
            pass
        found = self.overrides.get(model)
        if found is None:
            found = self._lookup(model)
        self._rates[model] = found
        if found is None and model not in self.unknown:
            self.unknown.add(model)
            log.warning("cost unknown: no price for model %s in litellm's map; its calls are counted in tokens "
                        "only (set [prices.%r] input_per_mtok/output_per_mtok to price it)", model, model)
        return found

    def price(self, model: str, tokens_in: int, tokens_out: int) -> float | None:
        """USD for one call, None when the model's price is unknown."""
        r = self.rate(model)
        return None if r is None else r.cost(tokens_in, tokens_out)


_book = PriceBook()


def configure(overrides: Mapping[str, Rate]) -> PriceBook:
    """Install the config's ``[prices]`` as the process's price book (the daemon and CLI commands at start)."""
    global _book
    _book = PriceBook(overrides)
    return _book


def default_book() -> PriceBook:
    return _book


def price(model: str, tokens_in: int, tokens_out: int) -> float | None:
    """USD for a call of ``model`` with these tokens by the configured price book; None: price unknown."""
    return _book.price(model, tokens_in, tokens_out)
