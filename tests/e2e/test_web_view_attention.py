"""What waits for a person, in Chromium and the CLI, on one real `polpo daemon`: a task awaiting approval, a
reached checkpoint, a task on hold for the judge and a rejected file are listed at the top of every page (a count
in the header), first in `polpo status` and in `GET /api/attention`; the missions list is filtered, searched and
paged; the task page shows what is approved (its description and its agent's command) and the answer to Approve
does not stay beside the buttons of the task's next state; the mission's timeline has each attempt with its node;
the spend chart of one point is a step; the page loads with a loading state and asks for nothing that is missing.
Screenshots go to ``$POLPO_SCREENSHOTS`` (or a temp folder) as ``attention-*.png``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.browser import launched_chromium
from tests.support.daemon import daemon_process, mission_json, run_cli, shell_task, wait_events, write_config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shots() -> Path:
    folder = Path(os.environ.get("POLPO_SCREENSHOTS") or Path(tempfile.gettempdir()) / "polpo-web-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _missions() -> dict[str, str]:
    return {
        "deploy.json": mission_json(
            shell_task("build", "echo built > build.txt"),
            shell_task("ship", "echo shipping > shipped.txt", dependsOn=["build"], approval="before"), name="deploy"),
        "gated.json": mission_json(shell_task("a", "true"), shell_task("b", "true"), name="gated",
                                   checkpoints=[{"name": "look", "afterTasks": ["a"], "blocksTasks": ["b"]}]),
        "reviewed.json": mission_json(shell_task("write", "echo hi > out.txt", expectations=[
            {"type": "llm_review", "criteria": "out.txt says hi", "threshold": 3}]), name="reviewed"),
        "plain.json": mission_json(shell_task("one", "true"), name="plain"),
        "typo-dep.json": mission_json(shell_task("x", "true", dependsOn=["Biuld"]), name="typo-dep"),
    }


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    root = tmp_path_factory.mktemp("attention")
    config = write_config(root, extra="""
[http]
listen = "127.0.0.1:0"
token_env = "ATTENTION_NO_TOKEN"

[channels.inbox]
type = "file"
path = "inbox.jsonl"

[notify]
digest = 0.5
rules = [{ events = ["attention:digest"], channels = ["inbox"] }]
""")
    for name, text in _missions().items():
        (root / "missions" / name).write_text(text)
    state = root / "state"
    with daemon_process(config):
        wait_events(state, lambda evs: {"approval:requested", "checkpoint:reached", "assessment:error",
                                        "mission:rejected"} <= {e["event"] for e in evs}
                    and any(e["event"] == "mission:completed" and e.get("missionId") == "plain" for e in evs))
        yield config, json.loads((state / "http.json").read_text())["url"]


def test_status_and_the_api_list_what_waits_first_and_show_names_a_rejected_file(daemon: tuple[Path, str]) -> None:
    config, url = daemon
    out = run_cli("status", "--config", str(config)).stdout
    lines = out.splitlines()
    assert lines[1] == "waiting for you (4):", out
    assert "waiting for approval" in lines[2] and "deploy:2 'ship'" in lines[2]
    assert "polpo approve deploy:2 | polpo reject deploy:2 --reason TEXT" in lines[3]
    assert "paused at checkpoint" in lines[4] and "polpo resume gated look" in lines[5]
    assert "on hold: judge" in lines[6] and "no LLM judge is configured" in lines[6]
    assert "polpo retry reviewed:1" in lines[7]
    assert "file rejected" in lines[8] and "Biuld" in lines[8] and "polpo validate" in lines[9]
    deploy = next(line for line in lines if line.startswith("deploy "))
    assert "waiting for approval" in deploy and " running " not in deploy  # the mission's state, not "running"
    mission = run_cli("show", "deploy", "--config", str(config)).stdout
    assert mission.startswith("mission deploy (deploy): waiting for approval\n"), mission
    assert "waiting for you (1):" in mission and "polpo approve deploy:2" in mission
    task = run_cli("show", "deploy:2", "--config", str(config)).stdout
    assert "  status waiting for approval — waiting for a person's approval before it starts" in task, task
    shown = run_cli("show", "typo-dep", "--config", str(config))
    assert shown.returncode == 1 and "typo-dep.json was rejected at" in shown.stderr and "Biuld" in shown.stderr
    body = httpx.get(url + "/api/attention", timeout=10).json()
    assert body["count"] == 4 and [i["kind"] for i in body["items"]] == [
        "approval", "checkpoint", "on_hold", "rejected_file"]
    assert httpx.get(url + "/favicon.ico", timeout=10).headers["content-type"] == "image/svg+xml"
    # the digest a channel receives: the same list, with what to do and the commands
    state = config.parent.parent / "state"
    digest = wait_events(state, lambda evs: any(e["event"] == "attention:digest" and e["data"]["count"] == 4
                                                for e in evs))
    sent = next(e for e in reversed(digest) if e["event"] == "attention:digest")["data"]
    assert sent["items"][0]["commands"] == ["polpo approve deploy:2", "polpo reject deploy:2 --reason TEXT"]
    wait_events(state, lambda evs: any(e["event"] == "notification:sent" and e["data"]["channel"] == "inbox"
                                       for e in evs))
    inbox = [json.loads(line) for line in (config.parent / "inbox.jsonl").read_text().splitlines()]
    assert inbox[0]["event"] == "attention:digest" and inbox[0]["data"]["items"][1]["kind"] == "checkpoint"


def test_the_page_lists_what_waits_and_filters_searches_and_pages_missions(daemon: tuple[Path, str],
                                                                            shots: Path) -> None:
    _, url = daemon
    with launched_chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        missing: list[str] = []
        page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
        held: list[Any] = []
        page.route("**/api/attention", lambda route: held.append(route))  # the first answer waits: loading…
        page.goto(url + "/", wait_until="domcontentloaded")
        page.wait_for_selector("#loading")
        assert page.is_visible("#loading") and page.get_attribute("#view", "aria-busy") == "true"
        page.screenshot(path=str(shots / "attention-0-loading.png"))
        assert len(held) == 1
        held[0].continue_()
        page.unroute("**/api/attention")
        page.wait_for_selector("#missions")
        assert page.locator("#loading").count() == 0
        assert page.inner_text("#attention-count") == "4 waiting for you"
        items = page.locator("#attention .waiting-item")
        assert [items.nth(i).get_attribute("data-kind") for i in range(4)] == [
            "approval", "checkpoint", "on_hold", "rejected_file"]
        assert "polpo approve deploy:2" in items.nth(0).inner_text()
        states = {r.get_attribute("data-mission-id"): r.locator(".badge").inner_text()
                  for r in page.locator("#missions tbody tr").all()}
        assert states == {"deploy": "waiting for approval", "gated": "paused at checkpoint",
                          "reviewed": "on hold: judge", "plain": "completed"}
        page.screenshot(path=str(shots / "attention-1-missions.png"), full_page=True)

        page.select_option("#filter-status", "waiting")
        page.wait_for_function("document.querySelectorAll('#missions tbody tr').length === 3")
        assert "status=waiting" in page.url
        page.select_option("#filter-status", "")
        page.wait_for_function("document.querySelectorAll('#missions tbody tr').length === 4")
        page.fill("#search", "PLAI")
        page.wait_for_function("document.querySelectorAll('#missions tbody tr').length === 1")
        assert page.get_attribute("#missions tbody tr", "data-mission-id") == "plain"

        page.goto(url + "/#/?limit=3")
        page.wait_for_selector("#pager")
        assert "1–3 of 4" in page.inner_text("#pager") and page.is_disabled("#newer")
        page.click("#older")
        page.wait_for_selector('#pager[data-offset="3"]')
        assert page.locator("#missions tbody tr").count() == 1 and page.is_disabled("#older")
        oldest = httpx.get(url + "/api/missions", timeout=10).json()["missions"][0]["id"]
        assert page.get_attribute("#missions tbody tr", "data-mission-id") == oldest
        assert not missing, missing  # no favicon.ico or other 404
        page.close()


def test_the_approval_page_shows_what_is_approved_and_the_timeline_its_attempts(daemon: tuple[Path, str],
                                                                               shots: Path) -> None:
    config, url = daemon
    state = config.parent.parent / "state"
    with launched_chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(url + "/#/task/deploy:2")
        page.wait_for_selector('#task-summary[data-status="awaiting_approval"]')
        assert page.inner_text("#task-summary .badge") == "waiting for approval"
        assert page.inner_text("#description") == "echo shipping > shipped.txt"
        assert page.inner_text("#agent-how") == "bash -c {description}"
        page.screenshot(path=str(shots / "attention-2-approval.png"), full_page=True)
        page.click("#reject")  # a reason is required: nothing is sent without one
        assert page.locator("#answer").count() == 0
        page.click("#approve")
        wait_events(state, lambda evs: any(e["event"] == "mission:completed" and e.get("missionId") == "deploy"
                                           for e in evs))
        page.wait_for_selector('#task-summary[data-status="done"]')
        page.wait_for_selector("#answer.past")
        assert page.inner_text("#answer") == "Approve → done: approved deploy:2: its first attempt runs next"
        assert page.inner_text("#attention-count") == "3 waiting for you"
        page.screenshot(path=str(shots / "attention-3-approved.png"), full_page=True)

        page.goto(url + "/#/mission/deploy")
        page.wait_for_selector("#timeline")
        bars = page.locator("#timeline g.attempt")
        assert bars.count() == 2
        assert {bars.nth(i).get_attribute("data-outcome") for i in range(2)} == {"passed"}
        assert all(bars.nth(i).get_attribute("data-node") for i in range(2))  # the node that ran it
        page.screenshot(path=str(shots / "attention-4-timeline.png"), full_page=True)

        # the spend chart of one point: a step from 0 at the start to the point, then flat to the end
        box = page.evaluate("""() => {
            const f = spendChart([{at: "2026-01-01T00:00:30Z", usd: 0.25, tokens: 100}],
                                 "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z");
            document.getElementById("view").append(f);
            const b = f.querySelector("path").getBBox();
            return {w: b.width, h: b.height, caption: f.querySelector("figcaption").textContent};
        }""")
        assert box["w"] > 500 and box["h"] > 50 and "$0.2500" in box["caption"]
        page.close()
