"""The web view's schedules, in headless Chromium against a real `polpo daemon` process: the missions page lists
a scheduled mission file with its next run, and its Pause, Resume and Remove buttons act on the schedule through
the API (a same-origin POST), as `polpo schedules pause|resume|remove` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import page_on_a_daemon
from tests.support.daemon import (
    mission_json,
    read_events,
    shell_task,
    wait_events,
    write_config,
)

HTTP = '[http]\nlisten = "127.0.0.1:0"\ntoken_env = "SCHEDULES_PAGE_TEST_NO_TOKEN"\n'


def has(name: str) -> Any:
    return lambda evs: any(e["event"] == name for e in evs)


@pytest.mark.slow
def test_the_missions_page_pauses_resumes_and_removes_a_schedule(tmp_path: Path) -> None:
    config = write_config(tmp_path, extra=HTTP)
    state = tmp_path / "state"
    with page_on_a_daemon(config) as (browser, url):
        (tmp_path / "missions" / "nightly.json").write_text(mission_json(
            shell_task("report", "true"), name="nightly", schedule="0 2 * * *", timezone="Europe/Rome"))
        wait_events(state, has("schedule:created"))
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.on("dialog", lambda dialog: dialog.accept())  # "Remove the schedule nightly?"
        page.goto(url + "/#/")
        row = '#schedules tr[data-schedule-id="nightly"]'
        page.wait_for_selector(f'{row}[data-status="active"]')
        assert "0 2 * * * (Europe/Rome)" in page.inner_text(row)
        page.click("#pause-nightly")
        page.wait_for_selector(f'{row}[data-status="paused"]')
        page.wait_for_selector('#answer[data-state="done"]')
        page.click("#resume-nightly")
        page.wait_for_selector(f'{row}[data-status="active"]')
        page.click("#remove-nightly")
        page.wait_for_selector("#schedules", state="detached")
    changes = [e["data"] for e in read_events(state) if e["event"] == "schedule:changed"]
    assert [(c["action"], c["by"]) for c in changes] == [("paused", "api"), ("resumed", "api"), ("removed", "api")]
