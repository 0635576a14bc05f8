"""The web view when the daemon refuses its event stream (503 past ``[http] max_stream_clients``): the page says
it lost the stream and connects again once a slot is free (a browser's EventSource does not retry a refused
stream by itself). A real browser (Debian's chromium, headless, via playwright) against a real `polpo daemon`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.browser import launched_chromium
from tests.support.daemon import daemon_process, wait_events, write_config

pytestmark = pytest.mark.slow



@pytest.fixture
def browser() -> Iterator[Any]:
    with launched_chromium() as b:
        yield b


def test_the_page_follows_events_again_once_a_refused_stream_has_a_slot(tmp_path: Path, browser: Any) -> None:
    config = write_config(tmp_path, extra='[http]\nlisten = "127.0.0.1:0"\ntoken_env = "WEB_TEST_NO_TOKEN"\n'
                                          "max_stream_clients = 1\n")
    with daemon_process(config):
        wait_events(tmp_path / "state", lambda evs: any(e["event"] == "orchestrator:started" for e in evs))
        url = json.loads((tmp_path / "state" / "http.json").read_text())["url"]
        page = browser.new_page()
        with httpx.stream("GET", url + "/api/events/stream") as held:  # the only slot
            assert held.status_code == 200
            page.goto(url + "/")
            page.wait_for_selector('#connection[data-state="lost"]', timeout=15_000)
            assert page.text_content("#connection") == "reconnecting…"
        page.wait_for_selector('#connection[data-state="live"]', timeout=30_000)  # retried after the slot freed
