"""The daemon's one LLM client as the config describes it: concurrency, retries, ``[limits]`` and ``[prices]``.

Agents, reviewers and judges share it (the engine hands the factory's client to the assessor), so a provider's
requests-per-minute limit holds for all of them together, and every caller prices a call the same way.
"""

from __future__ import annotations

from polpo.config import Config
from polpo.llm import prices
from polpo.llm.client import LLMClient
from polpo.llm.ratelimit import Limit, RateLimiter

__all__ = ["client_from_config", "price_book"]


def price_book(cfg: Config) -> prices.PriceBook:
    """Install ``[prices]`` as the process's price book (what :func:`polpo.llm.prices.price` uses)."""
    return prices.configure({model: prices.Rate(p.input_per_mtok, p.output_per_mtok)
                             for model, p in cfg.prices.items()})


def client_from_config(cfg: Config) -> LLMClient:
    """The limiter measures with the real clock, as its sleeps are real (a test injects its own limiter)."""
    limits = {key: Limit(rpm=lim.rpm, tpm=lim.tpm) for key, lim in cfg.limits.items()}
    return LLMClient(per_model=cfg.llm.max_concurrency_per_model, max_retries=cfg.llm.max_retries,
                     limiter=RateLimiter(limits) if limits else None, prices=price_book(cfg))
