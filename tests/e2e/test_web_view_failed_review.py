"""The web view's task page for a review that ended in an error (the judge's port is dead): the check says ERROR, and
the failed try's reviewers are listed under it with how each failed, though their traces are kept apart from a
verdict's (``ASSESSMENT/error``) — in a real browser against a real daemon process (see test_web_view.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support.browser import WEB_ON, page_on_a_daemon
from tests.support.daemon import mission_json, post_mission, shell_task, wait_events, write_config

pytestmark = pytest.mark.slow


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_task_page_lists_the_reviewers_of_a_review_that_failed(tmp_path: Path) -> None:
    config = write_config(tmp_path, extra=f"""
[judge]
models = ["openai/a", "openai/b", "openai/c"]
api_base = "http://127.0.0.1:{dead_port()}/v1"
outage_retries = 0

[llm]
max_retries = 0
""" + WEB_ON)
    review = {"type": "llm_review", "criteria": "out.txt greets the user", "threshold": 3.0,
              "dimensions": [{"name": "greeting", "weight": 1.0}]}
    with page_on_a_daemon(config) as (browser, url):
        state = tmp_path / "state"
        post_mission(url, "held.json", mission_json(shell_task("write", "echo hello > out.txt", expectations=[review])))
        wait_events(state, lambda evs: any(e["event"] == "assessment:error" for e in evs), timeout=60)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(url + "/#/task/held:1")
        check = page.locator('.check[data-type="llm_review"]')
        page.wait_for_selector('.check[data-type="llm_review"] .failed-try')
        assert check.locator("b").first.inner_text().startswith("ERROR · llm_review")
        summaries = check.locator("details.reviewer > summary").all_inner_texts()
        assert len(summaries) == 6, summaries  # three seats, tried twice
        assert [s.split(" · ")[:2] for s in summaries[:3]] == [
            ["reviewer 0", "openai/a"], ["reviewer 1", "openai/b"], ["reviewer 2", "openai/c"]], summaries
        assert all(" · failed: " in s and "onnection" in s for s in summaries), summaries
        page.close()
