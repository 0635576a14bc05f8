"""Questions and tool approvals in the web view, in headless Chromium against a real `polpo daemon` process: the
mission page lists what waits for a person; the task page shows the agent's question with an Answer box, and a
tool call waiting for approval with its arguments and Approve / Reject; each acts through the API, and the agent
goes on with what was said."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import page_on_a_daemon
from tests.support.daemon import llm_agent, read_events, wait_events, write_config
from tests.support.fake_llm import FakeLLM, text, tool_call

HTTP = '[http]\nlisten = "127.0.0.1:0"\ntoken_env = "QUESTIONS_PAGE_TEST_NO_TOKEN"\n'


def has(name: str, n: int = 1) -> Any:
    return lambda evs: sum(e["event"] == name for e in evs) >= n


@pytest.mark.slow
def test_a_person_answers_a_question_and_approves_a_call_from_the_web_view(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLPO_TEST_FAKE_LLM_KEY", "sk-test-web-0123456789")  # the daemon process's environment
    with FakeLLM() as srv:
        config = write_config(tmp_path, agents=llm_agent(srv.base_url, "ask_human = true",
                                                         'approve_tools = ["write_file"]'), extra=HTTP)
        state = tmp_path / "state"
        srv.script(tool_call("ask_human", {"question": "Which colour should the banner be?"}),
                   tool_call("write_file", {"path": "banner.txt", "content": "teal\n"}), text("the banner is teal"))
        with page_on_a_daemon(config) as (browser, url):
            (tmp_path / "missions" / "site.json").write_text(json.dumps({"name": "site", "tasks": [{
                "title": "Banner", "description": "Write banner.txt in the colour the owner wants.",
                "assignTo": "coder", "expectations": [{"type": "file_exists", "path": "banner.txt"}]}]}))
            wait_events(state, has("question:asked"), 120)
            page = browser.new_page(viewport={"width": 1200, "height": 800})
            page.goto(url + "/#/mission/site")
            page.wait_for_selector('#waiting li[data-task-id="site:1"][data-kind="question"]')
            assert "asks: Which colour should the banner be?" in page.inner_text("#waiting")
            page.goto(url + "/#/task/site:1")
            page.wait_for_selector('#task-summary[data-status="awaiting_answer"]')
            assert "Which colour should the banner be?" in page.inner_text("#question")
            page.fill("#reply-answer", "teal")
            page.click("#reply")
            page.wait_for_selector('#answer[data-state="done"]')
            wait_events(state, has("approval:requested"), 120)
            page.wait_for_selector('#task-summary[data-status="awaiting_approval"] #tool-call')
            shown = page.inner_text("#tool-call")
            assert "write_file" in shown and '"path": "banner.txt"' in shown and '"content": "teal\\n"' in shown
            page.click("#approve")
            evs = wait_events(state, has("mission:completed"), 120)
            page.wait_for_selector('#task-summary[data-status="done"]')
            assert "Q: Which colour should the banner be?" in page.inner_text("#questions")
    assert (state / "workspaces" / "site" / "banner.txt").read_text() == "teal\n"
    answered = next(e for e in evs if e["event"] == "question:answered")["data"]
    assert (answered["answer"], answered["by"]) == ("teal", "api")
    assert [e["data"]["status"] for e in read_events(state) if e["event"] == "approval:resolved"] == ["approved"]
