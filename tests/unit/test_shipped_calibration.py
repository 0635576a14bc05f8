"""The calibration shipped for the local judge of docs/how-to/local-models.md (Qwen2.5-Coder-1.5B-Instruct, one
seat): it loads as ``[judge] calibration``, holds a rule fitted at ``max_false_pass = 0.1`` that kept to it on its
labels (at most a tenth of the broken items passed without a person), on enough broken labels to measure that
rate, and the page names it."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from polpo.config import parse_config
from polpo.review.calibration import load_calibration
from polpo.review.rule import labels_needed
from tests.support.doc_examples import parse_blocks

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "examples" / "judge" / "qwen2.5-coder-1.5b.calibration.json"


def test_the_shipped_rule_loads_and_held_its_false_pass_bound_on_its_labels() -> None:
    cal = load_calibration(SHIPPED)
    assert cal.rule is not None and cal.rule.max_false_pass == 0.1 and cal.rule.fail_below <= cal.rule.pass_at
    on = json.loads(SHIPPED.read_text())["rule"]["onLabels"]
    assert on["broken"] >= labels_needed(0.1) and on["falsePass"] <= 0.1 * on["broken"]
    page = REPO / "docs" / "how-to" / "local-models.md"
    [block] = [b for b in parse_blocks(page, page.read_text(), "toml") if SHIPPED.name in b.body]
    # the page's line, in the checkout's config/polpo.toml, names the shipped file
    cfg = parse_config({"judge": {"model": "openai/m"} | tomllib.loads(block.body)["judge"]},
                       REPO / "config" / "polpo.toml")
    assert cfg.judge.calibration is not None and cfg.judge.calibration.resolve() == SHIPPED.resolve()
