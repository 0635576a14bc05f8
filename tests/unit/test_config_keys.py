"""A misspelt config key is named with the key it most likely meant, in every table, like mission keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from polpo.config import Config, ConfigError, parse_config
from polpo.config_hints import keys_at


def test_a_misspelt_key_gets_did_you_mean_in_nested_and_named_tables(tmp_path: Path) -> None:
    raw = {"daemon": {"max_concurency": 3}, "agents": {"coder": {"type": "llm", "model": "m", "modle": "x"}},
           "judgee": {}, "http": {"listen_on": "127.0.0.1:1"}}
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, tmp_path / "polpo.toml")
    message = str(caught.value)
    assert 'daemon.max_concurency: unknown key; did you mean "max_concurrency"?' in message
    assert 'agents.coder.modle: unknown key; did you mean "model"?' in message
    assert 'judgee: unknown key; did you mean "judge"?' in message
    assert 'http.listen_on: unknown key; did you mean "listen"?' in message
    assert str(tmp_path / "polpo.toml") in message


def test_a_key_like_nothing_known_is_unknown_without_a_guess(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"daemon": {"zzzzqqq": 1}}, tmp_path / "polpo.toml")
    assert str(caught.value).endswith("daemon.zzzzqqq: unknown key")


def test_keys_at_walks_models_optional_tables_and_named_tables() -> None:
    assert "max_concurrency" in keys_at(Config, ("daemon",))
    assert "api_key_env" in keys_at(Config, ("agents", "any-name"))
    assert "daemon" in keys_at(Config, ())
    assert keys_at(Config, ("channels", "ops")) == []  # a free-form table: no guess rather than a wrong one
