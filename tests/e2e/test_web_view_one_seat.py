"""The web view's task page with a one-seat judge (``[judge] seats = 1``): one vote column, one reviewer, the
reviewer's score as the verdict — in a real browser against a real daemon process (see test_web_view.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.browser import WEB_ON, page_on_a_daemon
from tests.support.daemon import mission_json, post_mission, shell_task, wait_events, write_config
from tests.support.fake_llm import FakeLLM
from tests.support.judges import ScriptedJudge

pytestmark = pytest.mark.slow


def test_the_task_page_shows_a_one_seat_review(tmp_path: Path) -> None:
    with FakeLLM() as judge:
        judge.responder = ScriptedJudge(score=4.0)
        config = write_config(tmp_path, extra=f"""
[judge]
model = "openai/fake-model"
api_base = "{judge.base_url}"
seats = 1
""" + WEB_ON)
        review = {"type": "llm_review", "criteria": "out.txt greets politely", "threshold": 3.0,
                  "dimensions": [{"name": "politeness", "weight": 0.6, "description": "Is it polite?"},
                                 {"name": "clarity", "weight": 0.4, "description": "Is it clear?"}]}
        with page_on_a_daemon(config) as (browser, url):
            state = tmp_path / "state"
            post_mission(url, "one.json", mission_json(shell_task("write", "echo hello > out.txt", expectations=[review])))
            wait_events(state, lambda evs: any(e["event"] == "mission:completed" for e in evs), timeout=60)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(url + "/#/task/one:1")
            page.wait_for_selector('.check[data-type="llm_review"] table.votes')
            votes = page.locator('.check[data-type="llm_review"] table.votes')
            assert votes.locator("th").all_inner_texts() == ["dimension", "weight", "reviewer 0", "score"]
            assert votes.locator('td.vote[data-kept="true"]').count() == 2
            assert page.locator('.check[data-type="llm_review"] details.reviewer').count() == 1
            assert "single reviewer" not in page.inner_text('.check[data-type="llm_review"]')
            page.close()
