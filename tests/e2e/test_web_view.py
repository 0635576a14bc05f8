"""The web view in a real browser: Debian's chromium, driven headless by playwright, against a real `polpo daemon`
process serving the API on 127.0.0.1, with a judge panel of three models answering over real HTTP (FakeLLM).

A mission is sent through the API while the page is open; its tasks turn done on the page without a reload (a
marker set in the page survives); the task page shows each reviewer's vote per dimension, the outlier dropped.
The page's own Cancel and Retry buttons act on a running daemon; a page of another origin that posts to the API
(a no-cors fetch, text/plain and form posts) is refused and its command never runs.
Screenshots are saved under the folder printed at the start (``$POLPO_SCREENSHOTS`` or a temp folder).
"""

from __future__ import annotations

import html
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.browser import launched_chromium
from tests.support.daemon import (
    daemon_process,
    mission_json,
    read_events,
    run_cli,
    shell_task,
    wait_events,
    write_config,
)
from tests.support.fake_llm import FakeLLM, RecordedRequest
from tests.support.judges import ScriptedJudge

pytestmark = pytest.mark.slow

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
    with launched_chromium() as b:
        yield b


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
    # the reviewers' calls (FakeLLM reports usage; the judge has no price: counted in tokens) over time and by phase
    assert int(page.get_attribute("#spend-chart", "data-points") or 0) >= 2
    assert "tokens" in page.inner_text("figure.spend-over-time figcaption")
    assert page.locator('#spend-table tr[data-group="phase"][data-name="review"]').count() == 1
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


def events_of(state: Path, mission: str) -> list[str]:
    return [e["event"] for e in read_events(state) if e.get("missionId") == mission]


def test_the_pages_own_cancel_and_retry_buttons_act(browser: Any, daemon: tuple[Path, str], screenshots: Path) -> None:
    config, url = daemon
    state = config.parent.parent / "state"
    held = mission_json(shell_task("wait", "sleep 60"), name="held")
    assert httpx.post(url + "/api/missions?name=held.json", content=held, headers=JSON, timeout=30).status_code == 201
    failing = mission_json(shell_task("needs go", "test -f go", maxRetries=0, maxFixAttempts=0), name="again")
    assert httpx.post(url + "/api/missions?name=again.json", content=failing, headers=JSON,
                      timeout=30).status_code == 201
    wait_events(state, lambda evs: any(e["event"] == "agent:spawned" and e.get("missionId") == "held" for e in evs))
    wait_events(state, lambda evs: any(e["event"] == "mission:completed" and e.get("missionId") == "again"
                                       for e in evs))

    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.on("dialog", lambda d: d.accept())  # "Cancel mission held?"
    page.goto(url + "/#/mission/held")
    page.click("#cancel")
    page.wait_for_selector('#answer[data-state="done"]')
    # the answer, then (the Cancel button gone with the running mission) apart from the buttons, as what happened
    assert page.inner_text("#answer").endswith("done: cancelling mission held")
    wait_events(state, lambda evs: any(e["event"] == "mission:completed" and e.get("missionId") == "held"
                                       for e in evs))
    assert "mission:cancelled" in events_of(state, "held")  # the daemon did it
    page.wait_for_selector('#mission-summary[data-status="cancelled"]')
    assert page.locator("#cancel").count() == 0 and page.locator("#answer").count() == 1  # the answer stays
    assert page.inner_text("#answer.past") == "Cancel mission → done: cancelling mission held"
    page.screenshot(path=str(screenshots / "4-cancelled-from-the-page.png"), full_page=True)

    (state / "workspaces" / "again" / "go").write_text("")
    page.goto(url + "/#/task/again:1")
    page.click("#retry")
    page.wait_for_selector('#answer[data-state="done"]')
    assert page.inner_text("#answer").endswith("done: retrying again:1")
    wait_events(state, lambda evs: [e["data"]["outcome"] for e in evs if e["event"] == "mission:completed"
                                    and e.get("missionId") == "again"] == ["failed", "completed"])
    page.wait_for_selector('#task-summary[data-status="done"]')
    assert page.locator("#retry").count() == 0  # a done task has nothing to retry
    page.close()


class _Evil(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def foreign_site(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A web server on another loopback port: another origin, as a page the user visits would be."""
    site = tmp_path / "site"
    site.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Evil, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield site, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_page_of_another_origin_cannot_post_a_mission(browser: Any, daemon: tuple[Path, str],
                                                        foreign_site: tuple[Path, str], tmp_path: Path) -> None:
    config, url = daemon
    state = config.parent.parent / "state"
    site, origin = foreign_site
    marker = tmp_path / "markers"
    marker.mkdir()

    def doc(name: str) -> str:
        return mission_json(shell_task("x", f"id > {marker / name}"), name=name)

    api = url + "/api/missions"
    # the text/plain form trick: the field name and value join into a JSON document with "=" inside a string
    form_json = doc("pwned-form-text")[:-1] + ', "pad": "'
    (site / "index.html").write_text(f"""<!doctype html><html><body>
<iframe name="sink"></iframe>
<form id="text" method="POST" action="{api}" enctype="text/plain" target="sink">
  <input name="{html.escape(form_json)}" value='"}}'></form>
<form id="urlenc" method="POST" action="{api}" target="sink">
  <input name="doc" value="{html.escape(doc('pwned-form-url'))}"></form>
</body></html>""")
    page = browser.new_page()
    page.goto(origin + "/index.html")
    for name, ctype in (("pwned-nocors-text", "text/plain"), ("pwned-nocors-form", "application/x-www-form-urlencoded"),
                        ("pwned-nocors-json", "application/json")):
        with page.expect_response(lambda r: r.url == api) as sent:
            answer = page.evaluate("""async ([url, body, type]) => {
                const r = await fetch(url, {method: "POST", mode: "no-cors", body, headers: {"Content-Type": type}});
                return r.type; }""", [api, doc(name), ctype])
        assert answer == "opaque"  # sent; the page cannot read the answer (no-cors)…
        assert sent.value.status == 403  # …which was a refusal
    # a fetch that asks to read the answer: the API refuses it before any preflight could succeed
    cors = page.evaluate("""async ([url, body]) => {
        try { await fetch(url, {method: "POST", body, headers: {"Content-Type": "application/json"}});
              return "read"; } catch (e) { return "blocked"; } }""", [api, doc("pwned-cors-json")])
    assert cors == "blocked"
    for form in ("text", "urlenc"):
        with page.expect_response(lambda r: r.url == api) as sent:
            page.eval_on_selector(f"#{form}", "f => f.submit()")
        assert sent.value.status == 403  # the browser did post it, with its Origin
    page.close()

    # a mission sent after them goes through the same intake: once it has completed, any of them would have too
    assert httpx.post(api + "?name=after-evil.json", content=doc("after-evil"), headers=JSON, timeout=30).status_code == 201
    wait_events(state, lambda evs: any(e["event"] == "mission:completed" and e.get("missionId") == "after-evil"
                                       for e in evs))
    assert (marker / "after-evil").exists()  # a mission that does run leaves its marker
    assert sorted(p.name for p in marker.iterdir()) == ["after-evil"]
    assert not [e for e in read_events(state) if e["event"] == "mission:accepted"
                and str(e.get("missionId")).startswith("pwned")]


def test_behind_a_token_the_buttons_work_with_the_password_the_browser_asked_for(browser: Any, tmp_path: Path) -> None:
    config = write_config(tmp_path, extra='[http]\nlisten = "127.0.0.1:0"\ntoken_env = "WEB_TEST_TOKEN"\n')
    state = tmp_path / "state"
    with daemon_process(config, env={"WEB_TEST_TOKEN": "tok-web"}):
        wait_events(state, lambda evs: any(e["event"] == "orchestrator:started" for e in evs))
        url = json.loads((state / "http.json").read_text())["url"]
        held = mission_json(shell_task("wait", "sleep 60"), name="locked")
        assert httpx.post(url + "/api/missions", content=held, timeout=30, headers={
            **JSON, "Authorization": "Bearer tok-web"}).status_code == 201
        wait_events(state, lambda evs: any(e["event"] == "agent:spawned" for e in evs))
        context = browser.new_context(http_credentials={"username": "me", "password": "tok-web"})
        try:
            page = context.new_page()
            page.on("dialog", lambda d: d.accept())
            page.goto(url + "/#/mission/locked")
            page.click("#cancel")
            page.wait_for_selector('#answer[data-state="done"]')
            wait_events(state, lambda evs: any(e["event"] == "mission:cancelled" for e in evs))
        finally:
            context.close()


def test_opened_with_the_token_in_the_address_the_page_loads_and_follows(browser: Any, tmp_path: Path) -> None:
    """http://user:TOKEN@host/ is how people paste a token: the page must load its data and its live stream
    (fetch refuses a URL that carries credentials, so the page builds its requests from its origin)."""
    config = write_config(tmp_path, extra='[http]\nlisten = "127.0.0.1:0"\ntoken_env = "WEB_TEST_TOKEN"\n')
    state = tmp_path / "state"
    with daemon_process(config, env={"WEB_TEST_TOKEN": "tok-url"}):
        wait_events(state, lambda evs: any(e["event"] == "orchestrator:started" for e in evs))
        url = json.loads((state / "http.json").read_text())["url"]
        (tmp_path / "missions" / "shown.json").write_text(mission_json(shell_task("wait", "sleep 60"), name="shown"))
        wait_events(state, lambda evs: any(e["event"] == "agent:spawned" for e in evs))
        context = browser.new_context()
        try:
            page = context.new_page()
            page.goto(url.replace("http://", "http://me:tok-url@") + "/#/mission/shown")
            page.wait_for_selector("#cancel")  # the mission's page, with its data
            page.wait_for_selector('#connection[data-state="live"]')
            assert "Could not load" not in page.inner_text("body")
        finally:
            context.close()
