"""The web view in a real browser: Debian's chromium, driven headless by playwright, against a real `polpo daemon`
process serving the API on 127.0.0.1, with a judge panel of three models answering over real HTTP (FakeLLM).

A mission is sent through the API while the page is open; its tasks turn done on the page without a reload (a
marker set in the page survives); the task page shows each reviewer's vote per dimension, the outlier dropped.
Screenshots are saved under the folder printed at the start (``$POLPO_SCREENSHOTS`` or a temp folder).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.daemon import daemon_process, mission_json, run_cli, shell_task, wait_events, write_config
from tests.support.fake_llm import FakeLLM, RecordedRequest
from tests.support.judges import ScriptedJudge

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
MODELS = ("judge-a", "judge-b", "judge-c")
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def screenshots() -> Path:
    folder = Path(os.environ.get("POLPO_SCREENSHOTS") or Path(tempfile.gettempdir()) / "polpo-web-screenshots")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    print(f"\nweb view screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail("CI must have Debian's chromium (.ci/run installs it)")
        pytest.skip("no /usr/bin/chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)  # a fresh profile
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def judge() -> Iterator[FakeLLM]:
    def score(req: RecordedRequest) -> float:
        return 1.0 if req.get("model") == "judge-c" else 4.0  # judge-c's vote is an outlier

    with FakeLLM(models=MODELS) as srv:
        srv.responder = ScriptedJudge(score_for=score)
        yield srv


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, judge: FakeLLM) -> Iterator[tuple[Path, str]]:
    root = tmp_path_factory.mktemp("web")
    models = ", ".join(f'"openai/{m}"' for m in MODELS)
    config = write_config(root, extra=f"""
[judge]
models = [{models}]
api_base = "{judge.base_url}"
api_key_env = "WEB_JUDGE_KEY"
correct_expectations = false

[http]
listen = "127.0.0.1:0"
token_env = "WEB_TEST_NO_TOKEN"
""")
    with daemon_process(config, env={"WEB_JUDGE_KEY": "sk-web-test"}):
        wait_events(root / "state", lambda evs: any(e["event"] == "orchestrator:started" for e in evs))
        info = json.loads((root / "state" / "http.json").read_text())
        yield config, info["url"]


def reviewed_mission(name: str) -> str:
    review = {"type": "llm_review", "criteria": "out.txt greets politely", "threshold": 3.0,
              "dimensions": [{"name": "politeness", "weight": 0.6, "description": "Is it polite?"},
                             {"name": "clarity", "weight": 0.4, "description": "Is it clear?"}]}
    return mission_json(
        shell_task("write", "while [ ! -f go ]; do sleep 0.05; done; echo hello > out.txt",
                   expectations=[{"type": "file_exists", "path": "out.txt"}, review]),
        shell_task("check", "grep -q hello out.txt", dependsOn=["write"]),
        shell_task("publish", "cp out.txt published.txt"),
        name=name, qualityGates=[{"name": "reviewed", "afterTasks": ["write"], "blocksTasks": ["publish"],
                                  "minScore": 3}])


def test_a_mission_turns_done_on_the_page_and_its_reviewer_votes_show(
        browser: Any, daemon: tuple[Path, str], screenshots: Path) -> None:
    config, url = daemon
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(url + "/")
    page.wait_for_selector('#connection[data-state="live"]')
    page.evaluate("window.__notReloaded = true")

    r = httpx.post(url + "/api/missions?name=web.json", content=reviewed_mission("Greeting"), timeout=30,
                   headers=JSON)
    assert r.status_code == 201, r.text
    page.wait_for_selector('tr[data-mission-id="web"]')  # the list updated itself
    page.click('tr[data-mission-id="web"] a')
    page.wait_for_selector('g.node[data-task-id="web:1"][data-status="in_progress"]')
    assert page.locator("svg#graph path.edge").count() == 3  # write→check, write→gate, gate→publish
    assert page.locator('g.node.gate[data-gate="reviewed"][data-status="waiting"]').count() == 1
    page.screenshot(path=str(screenshots / "1-mission-running.png"), full_page=True)

    (config.parent.parent / "state" / "workspaces" / "web" / "go").write_text("")  # let the first task finish
    page.wait_for_selector('#mission-summary[data-status="completed"]', timeout=60_000)
    for n in (1, 2, 3):
        assert page.locator(f'g.node[data-task-id="web:{n}"][data-status="done"]').count() == 1
    assert page.locator('g.node.gate[data-gate="reviewed"][data-status="passed"]').count() == 1
    assert page.evaluate("window.__notReloaded") is True  # updated from the event stream, not a reload
    assert "4.00" in page.inner_text("#quality")  # the consensus: median of 4, 4 (the 1 dropped)
    assert page.locator('#events li[data-event="mission:completed"]').count() == 1
    page.screenshot(path=str(screenshots / "2-mission-finished.png"), full_page=True)

    page.click('g.node[data-task-id="web:1"]')
    page.wait_for_selector("#task-summary")
    votes = page.locator('.check[data-type="llm_review"] table.votes')
    assert votes.locator("th").all_inner_texts() == ["dimension", "weight", "reviewer 0", "reviewer 1",
                                                     "reviewer 2", "score"]
    dropped = votes.locator('td.vote[data-kept="false"]')
    assert dropped.count() == 2 and all("1.00" in t for t in dropped.all_inner_texts())
    assert votes.locator('td.vote[data-kept="true"]').count() == 4
    assert page.locator('.check[data-type="llm_review"] details.reviewer').count() == 3
    page.screenshot(path=str(screenshots / "3-task-votes.png"), full_page=True)
    page.close()


def test_status_and_show_tell_elapsed_time_attempt_kind_score_quality_and_gates(daemon: tuple[Path, str]) -> None:
    config, url = daemon
    state = config.parent.parent / "state"
    (state / "workspaces" / "cli").mkdir(parents=True, exist_ok=True)
    (state / "workspaces" / "cli" / "go").write_text("")
    assert httpx.post(url + "/api/missions?name=cli.json", content=reviewed_mission("cli"),
                      timeout=30, headers=JSON).status_code == 201
    wait_events(state, lambda evs: any(e["event"] == "mission:completed" and e.get("missionId") == "cli"
                                       for e in evs), 60)
    status = run_cli("status", "--all", "--config", str(config)).stdout
    line = next(x for x in status.splitlines() if "cli:1" in x)
    assert "done" in line and "attempt 1 (initial)" in line and "score 4.00" in line, line
    assert any(x.startswith("cli ") and x.rstrip().endswith("s") for x in status.splitlines()), status  # elapsed
    shown = run_cli("show", "cli", "--config", str(config)).stdout
    assert "quality average 4.00 over 1 scored task(s)" in shown, shown
    assert "gate reviewed: passed, average 4.00" in shown and "after write; blocks publish; minScore 3" in shown
