"""Debian's chromium, headless, driven by playwright: the browser of the web view's end-to-end tests.

Skipped where the machine has no /usr/bin/chromium; in CI (CI=true) that is a failure, since .ci/run installs it.
Each launch gets a fresh profile.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

__all__ = ["CHROMIUM", "launched_chromium"]

CHROMIUM = Path("/usr/bin/chromium")
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
