"""Debian's chromium, headless, driven by playwright: the browser of the web view's end-to-end tests.

Skipped where the machine has no /usr/bin/chromium; in CI (CI=true) that is a failure, since .ci/run installs it.
Each launch gets a fresh profile.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

__all__ = ["CHROMIUM", "WEB_ON", "launched_chromium", "page_on_a_daemon"]

CHROMIUM = Path("/usr/bin/chromium")
WEB_ON = '\n[http]\nlisten = "127.0.0.1:0"\ntoken_env = "WEB_TEST_NO_TOKEN"\n'
"""A config's ``[http]`` on a free loopback port, with no token (its variable is never set)."""
# without the background-networking flags chromium keeps trying hosts this closed network refuses
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]


@contextmanager
def launched_chromium() -> Iterator[Any]:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail("CI must have Debian's chromium (.ci/run installs it)")
        pytest.skip("no /usr/bin/chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@contextmanager
def page_on_a_daemon(config: Path, env: dict[str, str] | None = None) -> Iterator[tuple[Any, str]]:
    """Chromium and a real `polpo daemon` process of ``config`` (its ``[http]`` on; ``env`` added to its
    environment): (browser, the API's URL), once the daemon has started (its state folder is ``state`` beside the
    config's folder)."""
    from tests.support.daemon import daemon_process, wait_events

    state = config.parent.parent / "state"
    with launched_chromium() as browser, daemon_process(config, env=env):
        wait_events(state, lambda evs: any(e["event"] == "orchestrator:started" for e in evs))
        yield browser, json.loads((state / "http.json").read_text())["url"]
