"""Questions and tool approvals in the web view, in headless Chromium against one real `polpo daemon` process: the
mission page lists what waits for a person; the task page shows the agent's question with an Answer box, and a
tool call waiting for approval with its arguments and Approve / Reject; each acts through the API, and the agent
goes on with what was said. A command agent's question (its output asks) is shown on its task's page and in
"Waiting for you", is answered with that list's Answer action, and the agent runs again once, with the answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import page_on_a_daemon
from tests.support.daemon import llm_agent, mission_json, read_events, wait_events, write_config
from tests.support.fake_llm import FakeLLM, text, tool_call

pytestmark = pytest.mark.slow

HTTP = '[http]\nlisten = "127.0.0.1:0"\ntoken_env = "QUESTIONS_PAGE_TEST_NO_TOKEN"\n'
ASKER = """
[agents.asker]
type = "command"
command = ["bash", "{script}"]
timeout = 30
ask_human = true

[questions]
classify = false
"""
# each run appends a line (outside the workspace: a file changed there would make the output not a question)
ASKING_SCRIPT = """printf 'run answer=%s question=%s\\n' "$POLPO_ANSWER" "$POLPO_QUESTION" >> {runs}
if [ -z "$POLPO_ANSWER" ]; then echo 'Which colour should the banner be?'
else printf '%s\\n' "$POLPO_ANSWER" > banner.txt; echo "painted it $POLPO_ANSWER"; fi
"""


class Site:
    """The daemon both tests share (its start and Chromium's are most of their time)."""

    def __init__(self, root: Path, srv: FakeLLM, browser: Any, url: str) -> None:
        self.root, self.srv, self.browser, self.url = root, srv, browser, url
        self.state = root / "state"

    def submit(self, name: str, text: str) -> None:
        (self.root / "missions" / f"{name}.json").write_text(text)

    def wait(self, mission: str, name: str) -> list[dict[str, Any]]:
        return wait_events(self.state, lambda evs: any(e["event"] == name and e.get("missionId") == mission
                                                       for e in evs), 120)

    def page(self) -> Any:
        return self.browser.new_page(viewport={"width": 1200, "height": 800})


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("questions-page")
    script = root / "asker.sh"
    script.write_text(ASKING_SCRIPT.format(runs=root / "runs.log"))
    with FakeLLM() as srv:
        agents = llm_agent(srv.base_url, "ask_human = true", 'approve_tools = ["write_file"]')
        config = write_config(root, agents=agents + ASKER.format(script=script), extra=HTTP)
        with page_on_a_daemon(config, env={"POLPO_TEST_FAKE_LLM_KEY": "sk-test-web-0123456789"}) as (browser, url):
            yield Site(root, srv, browser, url)


def test_a_person_answers_a_question_and_approves_a_call_from_the_web_view(site: Site) -> None:
    site.srv.script(tool_call("ask_human", {"question": "Which colour should the banner be?"}),
                    tool_call("write_file", {"path": "banner.txt", "content": "teal\n"}), text("the banner is teal"))
    site.submit("site", json.dumps({"name": "site", "tasks": [{
        "title": "Banner", "description": "Write banner.txt in the colour the owner wants.",
        "assignTo": "coder", "expectations": [{"type": "file_exists", "path": "banner.txt"}]}]}))
    site.wait("site", "question:asked")
    page = site.page()
    page.goto(site.url + "/#/mission/site")
    page.wait_for_selector('#waiting li[data-task-id="site:1"][data-kind="question"]')
    assert "asks: Which colour should the banner be?" in page.inner_text("#waiting")
    page.goto(site.url + "/#/task/site:1")
    page.wait_for_selector('#task-summary[data-status="awaiting_answer"]')
    assert "Which colour should the banner be?" in page.inner_text("#question")
    page.fill("#reply-answer", "teal")
    page.click("#reply")
    page.wait_for_selector('#answer[data-state="done"]')
    site.wait("site", "approval:requested")
    page.wait_for_selector('#task-summary[data-status="awaiting_approval"] #tool-call')
    shown = page.inner_text("#tool-call")
    assert "write_file" in shown and '"path": "banner.txt"' in shown and '"content": "teal\\n"' in shown
    page.click("#approve")
    evs = [e for e in site.wait("site", "mission:completed") if e.get("missionId") == "site"]
    page.wait_for_selector('#task-summary[data-status="done"]')
    assert "Q: Which colour should the banner be?" in page.inner_text("#questions")
    page.close()
    assert (site.state / "workspaces" / "site" / "banner.txt").read_text() == "teal\n"
    answered = next(e for e in evs if e["event"] == "question:answered")["data"]
    assert (answered["answer"], answered["by"]) == ("teal", "api")
    assert [e["data"]["status"] for e in evs if e["event"] == "approval:resolved"] == ["approved"]


def test_a_command_agents_question_is_answered_from_the_waiting_list_and_it_runs_again_once(site: Site) -> None:
    site.submit("ask", mission_json({"title": "Banner", "description": "Paint the banner.", "assignTo": "asker",
                                     "expectations": [{"type": "file_exists", "path": "banner.txt"}]}, name="ask"))
    site.wait("ask", "question:asked")
    page = site.page()
    page.goto(site.url + "/#/task/ask:1")
    page.wait_for_selector('#task-summary[data-status="awaiting_answer"]')
    assert "The agent asks: Which colour should the banner be?" in page.inner_text("#question")
    item = page.locator('#attention .waiting-item[data-kind="question"][data-target="ask:1"]')
    shown = item.inner_text()
    assert "asks a person: Which colour should the banner be?" in shown and 'polpo answer ask:1 "…"' in shown
    item.locator("button", has_text="Answer").click()  # the answer is required: nothing is sent without one
    assert page.locator("#answer").count() == 0
    item.locator("input").fill("teal")
    item.locator("button", has_text="Answer").click()
    page.wait_for_selector('#attention #answer[data-state="done"]')
    assert "answered ask:1" in page.inner_text("#answer")
    site.wait("ask", "mission:completed")
    page.wait_for_selector('#task-summary[data-status="done"]')
    assert "Q: Which colour should the banner be?" in page.inner_text("#questions")
    assert page.locator("#attention .waiting-item").count() == 0
    assert "painted it teal" in page.text_content('.attempt[data-attempt="2"]')  # its second run's stdout
    assert page.locator(".attempt").count() == 2
    page.close()
    # the agent ran twice: it asked, then once more with the answer (and its question) in its environment
    assert (site.root / "runs.log").read_text().splitlines() == [
        "run answer= question=", "run answer=teal question=Which colour should the banner be?"]
    assert (site.state / "workspaces" / "ask" / "banner.txt").read_text() == "teal\n"
    evs = [e for e in read_events(site.state) if e.get("missionId") == "ask"]
    asked = next(e for e in evs if e["event"] == "question:asked")["data"]
    answered = next(e for e in evs if e["event"] == "question:answered")["data"]
    assert (asked["source"], answered["answer"], answered["by"]) == ("output", "teal", "api")
    assert next(e for e in evs if e["event"] == "mission:completed")["data"]["outcome"] == "completed"
