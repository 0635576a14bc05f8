"""The docs' local-model example (docs/how-to/providers.md) is a config polpo accepts, with the bounds it advertises."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from polpo.config import parse_config

PROVIDERS = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "providers.md"


def test_the_local_model_example_parses(tmp_path: Path) -> None:
    text = PROVIDERS.read_text()
    section = text[text.index("**Local and small models.**"):]
    block = re.search(r"```toml\n(.*?)```", section, re.DOTALL)
    assert block is not None
    cfg = parse_config(tomllib.loads(block.group(1)), tmp_path / "polpo.toml")
    assert cfg.judge.seats == 1 and cfg.judge.panel_models() == ["openai/qwen2.5-coder"]
    assert cfg.judge.max_tokens == 1024 and cfg.judge.max_turns == 6
    agent = cfg.agents["local"]
    assert agent.type == "llm" and agent.max_tokens == 1024 and agent.api_base == "http://127.0.0.1:8000/v1"
    assert agent.context_window == cfg.judge.context_window == 8192
